"""One SMTP submission with aiosmtplib, and the outbound-safety check of the SMTP host: the host
is resolved once, every address it resolves to must be public or allowed, and the connection
goes to one of those checked addresses — aiosmtplib gets the connected socket and the host
name (for TLS SNI and certificate checks), so no second lookup can lead elsewhere (no DNS
rebinding). Imports aiosmtplib, tidings.channels (base, email.mime, email.replies, netguard)
and tidings.core.
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
    tls_context = None if security == "none" else await _tls_context(config)
    host = str(config["host"])
    smtp: _SMTP | None = None
    try:
        async with asyncio.timeout(channel.timeout_s):
            sock = await connect_checked(host, int(config["port"]), allowed_networks(ctx))
            smtp = _SMTP(
                hostname=host.strip("[]"),  # for SNI and the certificate; never looked up
                sock=sock,
                use_tls=security == "tls",
                start_tls=False,  # STARTTLS explicitly, below
                tls_context=tls_context,
                timeout=channel.timeout_s,
                local_hostname=config.get("helo_name"),
            )
            outcome = await _transaction(smtp, config, dated(payload, ctx.attempt_at))
        # After the server took the message: a slow goodbye must not turn it into a retry.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(smtp.quit(), QUIT_TIMEOUT_S)
    finally:
        if smtp is not None:
            smtp.close()
    return outcome


class _SMTP(aiosmtplib.SMTP):
    """Closes by aborting: once the message is in (or the send is given up) there is nothing a
    graceful TLS shutdown could add, and it could outlive the send by up to 30 s."""

    def close(self) -> None:
        if isinstance(self.transport, asyncio.Transport):
            self.transport.abort()
        super().close()


async def _transaction(smtp: aiosmtplib.SMTP, config: Mapping[str, Any], message: bytes) -> Outcome:
    security = config.get("security", "starttls")
    await smtp.connect()
    if security == "starttls":
        await smtp.starttls()
    if config.get("username"):
        await smtp.login(str(config["username"]), str(config.get("password") or ""))
    recipients = [parseaddr(r)[1] for r in config["recipients"]]
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


async def connect_checked(host: str, port: int, allowed: Sequence[Network]) -> socket.socket:
    """A socket connected to one of the addresses `host` resolves to, after every one of them
    was checked; the first that answers wins. Connection errors are the last one's."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    for info in infos:
        address = str(info[4][0])
        if not is_allowed(address, allowed):
            raise BlockedAddress(host, address)
    error: OSError = OSError(f"{host} has no address")
    for family, kind, proto, _name, address_port in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address_port)
        except OSError as failed:
            sock.close()
            error = failed
            continue
        except BaseException:  # cancelled by the send's timeout
            sock.close()
            raise
        return sock
    raise error


__all__ = ["allowed_networks", "connect_checked", "deliver"]
