"""One SMTP submission with aiosmtplib, and the outbound-safety check of the SMTP host: every
address the host resolves to must be public or allowed, and the peer actually connected to is
checked again before any SMTP command is sent (nothing but a TLS hello, with implicit TLS,
goes out before that check). Imports aiosmtplib, tidings.channels (base, email.mime,
email.replies, netguard) and tidings.core.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Mapping, Sequence
from email.utils import parseaddr
from typing import Any, Final

import aiosmtplib

from tidings.channels.base import SendContext
from tidings.channels.email.mime import dated
from tidings.channels.email.replies import TlsSetupError, accepted
from tidings.channels.netguard import BlockedAddress, Network, is_allowed
from tidings.core.model import Channel
from tidings.core.outcome import Outcome

#: How long a goodbye (QUIT) may take once the message was accepted.
QUIT_TIMEOUT_S: Final = 1.0


def allowed_networks(ctx: SendContext) -> tuple[Network, ...]:
    """The SMTP host obeys the same TIDINGS_ALLOWED_PRIVATE_NETWORKS as webhook targets."""
    return ctx.http.allowed_networks


async def deliver(ctx: SendContext, channel: Channel, payload: bytes) -> Outcome:
    """Connect, check the peer, secure, authenticate and submit `payload`, within the
    channel's timeout; a slow goodbye after the server took the message is not waited for."""
    config = channel.config
    security = config.get("security", "starttls")
    smtp = _SMTP(
        hostname=str(config["host"]),
        port=int(config["port"]),
        use_tls=security == "tls",
        start_tls=False,  # STARTTLS only after the peer is checked
        tls_context=None if security == "none" else await _tls_context(config),
        timeout=channel.timeout_s,
        local_hostname=config.get("helo_name"),
    )
    try:
        async with asyncio.timeout(channel.timeout_s):
            outcome = await _transaction(smtp, ctx, config, payload)
        # After the server took the message: a slow goodbye must not turn it into a retry.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(smtp.quit(), QUIT_TIMEOUT_S)
    finally:
        smtp.close()
    return outcome


class _SMTP(aiosmtplib.SMTP):
    """Closes by aborting: once the message is in (or the send is given up) there is nothing a
    graceful TLS shutdown could add, and it could outlive the send by up to 30 s."""

    def close(self) -> None:
        if isinstance(self.transport, asyncio.Transport):
            self.transport.abort()
        super().close()


async def _transaction(
    smtp: aiosmtplib.SMTP, ctx: SendContext, config: Mapping[str, Any], payload: bytes
) -> Outcome:
    host, security = str(config["host"]), config.get("security", "starttls")
    allowed = allowed_networks(ctx)
    await check_host(host, int(config["port"]), allowed)
    await smtp.connect()
    peer = str(smtp.get_transport_info("peername")[0])
    if not is_allowed(peer, allowed):
        raise BlockedAddress(host, peer)
    if security == "starttls":
        await smtp.starttls()
    if config.get("username"):
        await smtp.login(str(config["username"]), str(config.get("password") or ""))
    recipients = [parseaddr(r)[1] for r in config["recipients"]]
    message = dated(payload, ctx.attempt_at)
    refused, reply = await smtp.sendmail(parseaddr(config["sender"])[1], recipients, message)
    return accepted(refused, reply, recipients)


async def _tls_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """Verified against the system store, or `ca_file`; `verify: false` only on request."""
    try:
        context = await asyncio.to_thread(ssl.create_default_context, cafile=config.get("ca_file"))
    except (OSError, ValueError) as error:
        raise TlsSetupError(f"config.ca_file cannot be loaded: {error}") from None
    if config.get("verify", True) is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def check_host(host: str, port: int, allowed: Sequence[Network]) -> None:
    """Every address `host` resolves to must be allowed: aiosmtplib may connect to any."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    for info in infos:
        address = str(info[4][0])
        if not is_allowed(address, allowed):
            raise BlockedAddress(host, address)


__all__ = ["allowed_networks", "check_host", "deliver"]
