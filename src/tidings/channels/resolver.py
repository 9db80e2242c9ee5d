"""The aiohttp resolver of every outbound send: what the name resolves to, less every address
`tidings.channels.netguard` refuses. Imports aiohttp's resolver interface and netguard.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from tidings.channels.netguard import BlockedAddress, Network, is_allowed


class GuardedResolver(AbstractResolver):
    """Resolves through `inner` and drops every address a send may not reach.

    aiohttp connects only to the addresses its resolver returned, so the address checked
    here is the one connected to: a DNS answer that changes in between cannot slip through.
    """

    def __init__(
        self, allowed_networks: Iterable[Network] = (), inner: AbstractResolver | None = None
    ) -> None:
        self._allowed = tuple(allowed_networks)
        # ThreadedResolver: getaddrinfo in a thread, no aiodns needed. It needs a running loop.
        self._inner = inner if inner is not None else ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        kept = [r for r in results if is_allowed(r["host"], self._allowed)]
        if results and not kept:
            raise BlockedAddress(host, results[0]["host"])
        return kept

    async def close(self) -> None:
        await self._inner.close()
