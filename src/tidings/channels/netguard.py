"""Outbound safety (DESIGN §3): which addresses a send may connect to, checked on the address
actually connected to (`tidings.channels.resolver` applies it to every address aiohttp
resolves). Imports tidings.core; nothing else: the settings, the API and the CLI check
addresses without loading an HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import TypeAlias

from tidings.core.errors import ConfigError

Network: TypeAlias = IPv4Network | IPv6Network
Address: TypeAlias = IPv4Address | IPv6Address

SETTING = "TIDINGS_ALLOWED_PRIVATE_NETWORKS"

# Named only to make refusals self-explaining; the rule itself is "not public".
_METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")

# IPv6 forms that carry an IPv4 address (RFC 6052 NAT64, RFC 3056 6to4, RFC 4380 Teredo): a
# packet to one may reach that IPv4 address, so each is judged by the address it embeds too,
# whatever the standard library thinks of the IPv6 prefix itself.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # translates to the embedded address
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")
# Never public: NAT64 for local use (RFC 8215: "within domains", so its targets are inside
# the operator's network), site-local (deprecated, RFC 3879) and IPv4-compatible (deprecated,
# RFC 4291: ::a.b.c.d).
_NEVER_PUBLIC = (
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("fec0::/10"),
    ipaddress.ip_network("::/96"),
)


class BlockedAddress(Exception):
    """A target host is, or resolves only to, an address outbound sends may not reach."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(_refusal(host, address))
        self.host = host
        self.address = address


def _refusal(host: str, address: str) -> str:
    if _address(address) is None:
        # Recent aiohttp refuses these itself; older versions hand them to the OS, which
        # reads "127.1" or "2130706433" as 127.0.0.1.
        return (
            f"refused to connect: {address} is not a canonical IP address; "
            f"write it as a dotted quad, an IPv6 address or a hostname"
        )
    same = host in (address, f"[{address}]")
    where = address if same else f"{host!r} resolves to {address}, which"
    return (
        f"refused to connect: {where} is a {describe(address)} address "
        f"(private/loopback/link-local addresses are refused); "
        f"allow it with {SETTING}{_example(address)}"
    )


def parse_networks(text: str | Sequence[str] | None) -> tuple[Network, ...]:
    """CIDRs from "10.0.0.0/8, fd00::/8" (or a list of such strings); empty → ()."""
    if text is None:
        return ()
    parts = [text] if isinstance(text, str) else list(text)
    entries = [e.strip() for part in parts for e in part.split(",") if e.strip()]
    return tuple(_parse_network(entry) for entry in entries)


def _parse_network(entry: str) -> Network:
    try:
        return ipaddress.ip_network(entry, strict=True)
    except ValueError as error:
        hint = ""
        # A typo like 10.0.0.5/8 is common; name the network the operator probably meant.
        with contextlib.suppress(ValueError):
            hint = f"; did you mean {ipaddress.ip_network(entry, strict=False)}?"
        raise ConfigError(
            f"{SETTING}: {entry!r} is not a CIDR network such as 127.0.0.0/8 or fd00::/8 "
            f"({error}){hint}"
        ) from None


def _address(text: str) -> Address | None:
    """`text` as an address, IPv4-mapped and NAT64 IPv6 unwrapped; None when it is not one."""
    try:
        address = ipaddress.ip_address(text.strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
    if isinstance(address, IPv6Address):
        # ::ffff:127.0.0.1 and 64:ff9b::127.0.0.1 reach 127.0.0.1: judge them as what they reach.
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def embedded(address: IPv6Address) -> list[tuple[str, IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries on the way (6to4, Teredo), named."""
    if address in _SIX_TO_FOUR:
        return [("6to4", IPv4Address((int(address) >> 80) & 0xFFFFFFFF))]
    if address in _TEREDO and address.teredo is not None:
        server, client = address.teredo
        return [("Teredo server", server), ("Teredo client", client)]
    return []


def _in_any(address: Address, networks: Iterable[Network]) -> bool:
    # Membership across IP versions is simply False, so mixed lists need no filtering.
    return any(address in network for network in networks)


def _is_public(address: Address) -> bool:
    if isinstance(address, IPv6Address):
        if _in_any(address, _NEVER_PUBLIC):
            return False
        if not all(_is_public(inner) for _, inner in embedded(address)):
            return False
        if address in _SIX_TO_FOUR:
            # Judged by the address it carries alone: Python 3.13 calls all of 2002::/16
            # not global (IANA's registry), 3.11.7 and 3.12.1 call it global, and where a
            # send may go must not depend on which one runs.
            return True
    # is_global alone admits multicast (224/4, ff00::/8) and some reserved IPv6 ranges.
    return (
        address.is_global
        and not address.is_multicast
        and not address.is_reserved
        and not address.is_unspecified
    )


def is_allowed(address: str, allowed_networks: Iterable[Network] = ()) -> bool:
    """True when a send may connect to `address`: publicly routable, or explicitly allowed.

    Pure. Anything that is not an IP address is refused.
    """
    parsed = _address(address)
    if parsed is None:
        return False
    return _is_public(parsed) or _in_any(parsed, allowed_networks)


def describe(address: str) -> str:
    """What kind of non-public address `address` is, for error messages."""
    parsed = _address(address)
    if parsed is None:
        return "non-canonical IP"
    if isinstance(parsed, IPv6Address):
        hidden = [(n, inner) for n, inner in embedded(parsed) if not _is_public(inner)]
        if hidden:
            name, inner = hidden[0]
            return f"{name} form of {inner}, a {describe(str(inner))}"
        if _in_any(parsed, _NEVER_PUBLIC[:1]):
            return "local-use NAT64"
        if parsed.is_site_local:
            return "site-local"
    checks = [
        (parsed in _METADATA, "cloud metadata (link-local)"),
        (parsed.is_loopback, "loopback"),
        (parsed.is_link_local, "link-local"),
        (_in_any(parsed, [_SHARED]), "shared (CGNAT)"),
        (parsed.is_multicast, "multicast"),
        (parsed.is_unspecified, "unspecified"),
        (parsed.is_private, "private"),
        (parsed.is_reserved, "reserved"),
    ]
    return next((kind for hit, kind in checks if hit), "non-public")


def _example(address: str) -> str:
    parsed = _address(address)
    return "" if parsed is None else f" (e.g. {ipaddress.ip_network(parsed)})"


def _looks_like_ip_literal(host: str) -> bool:
    # aiohttp's own test (helpers.is_ip_address): such hosts skip the resolver entirely.
    return ":" in host or host.replace(".", "").isdigit()


def check_literal_host(host: str, allowed_networks: Iterable[Network] = ()) -> None:
    """Refuse an IP-literal `host` that is not allowed; hostnames are left to the resolver.

    aiohttp never calls the resolver for hosts that look like IP literals, so these must be
    checked before the request. A host aiohttp would treat as a literal but that is not a
    canonical address (e.g. "2130706433", "127.1") is refused rather than guessed at.
    """
    bare = host.removeprefix("[").removesuffix("]")
    if not _looks_like_ip_literal(bare) and _address(bare) is None:
        return
    if not is_allowed(bare, allowed_networks):
        raise BlockedAddress(host, bare)


async def refusal(
    host: str, allowed_networks: Iterable[Network] = (), timeout_s: float = 2.0
) -> str | None:
    """Why sends to `host` would be refused (it is, or resolves only to, addresses that are
    neither public nor allowed), to tell an operator when a channel is saved rather than at
    its first send; None when they would not be, or when the name does not resolve now."""
    bare = host.removeprefix("[").removesuffix("]")
    if _looks_like_ip_literal(bare) or _address(bare) is not None:
        address = bare
    else:
        loop = asyncio.get_running_loop()
        try:
            found = await asyncio.wait_for(
                loop.getaddrinfo(bare, None, type=socket.SOCK_STREAM), timeout_s
            )
        except (OSError, TimeoutError):
            return None
        addresses = [str(info[4][0]) for info in found]
        if not addresses or any(is_allowed(a, allowed_networks) for a in addresses):
            return None
        address = addresses[0]
    if is_allowed(address, allowed_networks):
        return None
    return _refusal(host, address).removeprefix("refused to connect: ")
