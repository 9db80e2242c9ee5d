"""SMTP submission emulator: aiosmtpd on 127.0.0.1 in a background thread (channels.md §9).

EHLO, STARTTLS or implicit TLS with a certificate made at test time (trustme), AUTH PLAIN/LOGIN
(refused before TLS on a STARTTLS port, as real submission servers do), SIZE, and scripted
replies: per-recipient refusals, a one-shot reply to MAIL/RCPT/DATA, a greeting that turns the
client away, a connection dropped mid-DATA, a command that hangs. Everything accepted is
recorded with the envelope, the raw message and whether it came over TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import logging
import ssl
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast

import trustme
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

SIZE_LIMIT = 10 * 1024 * 1024


class _QuietLoginData(logging.Filter):
    """aiosmtpd 1.4 warns on every successful AUTH about its own deprecated attribute."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "login_data is deprecated" not in record.getMessage()


logging.getLogger("mail.log").addFilter(_QuietLoginData())


@dataclass
class Mail:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    tls: bool
    user: str | None

    @property
    def message(self) -> EmailMessage:
        return cast(EmailMessage, email.message_from_bytes(self.data, policy=email.policy.default))


class Certificates:
    """A throwaway CA and a server certificate for localhost and 127.0.0.1."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.leaf = self.ca.issue_cert("localhost", "127.0.0.1")
        self._dir = tempfile.TemporaryDirectory(prefix="tidings-smtp-")
        self.ca_file = str(Path(self._dir.name) / "ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_file)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.leaf.configure_cert(context)
        return context

    def cleanup(self) -> None:
        self._dir.cleanup()


@dataclass
class _Script:
    replies: dict[str, deque[str]] = field(default_factory=dict)
    hangs: dict[str, float] = field(default_factory=dict)
    greeting: str | None = None
    drop_data: bool = False


class SmtpEmulator:
    def __init__(
        self,
        *,
        security: str = "starttls",
        credentials: tuple[str, str] | None = None,
        size_limit: int | None = SIZE_LIMIT,
        certificates: Certificates | None = None,
    ) -> None:
        self.security = security
        self.credentials = credentials
        self.size_limit = size_limit
        self._own_certs = certificates is None
        self.certs = certificates or Certificates()
        self.refused: dict[str, str] = {}
        self.mails: list[Mail] = []
        self.connections = 0
        self._script = _Script()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._live: set[asyncio.BaseProtocol] = set()
        self.port = 0

    @property
    def ca_file(self) -> str:
        return self.certs.ca_file

    # -- arranging ------------------------------------------------------------------------

    def refuse(self, address: str, reply: str = "550 5.1.1 User unknown") -> None:
        """Every RCPT TO for `address` gets `reply`."""
        with self._lock:
            self.refused[address.lower()] = reply

    def fail_next(self, command: str, reply: str) -> None:
        """The next MAIL, RCPT or DATA gets `reply` instead of its usual answer."""
        with self._lock:
            self._script.replies.setdefault(command.upper(), deque()).append(reply)

    def greet_next(self, reply: str) -> None:
        """The next connection is greeted with `reply` (e.g. 421, 554) and closed."""
        with self._lock:
            self._script.greeting = reply

    def drop_next_data(self) -> None:
        """The next DATA is read, then the connection is cut with no reply."""
        with self._lock:
            self._script.drop_data = True

    def hang_next(self, command: str, seconds: float) -> None:
        with self._lock:
            self._script.hangs[command.upper()] = seconds

    def received(self) -> list[Mail]:
        with self._lock:
            return list(self.mails)

    # -- serving --------------------------------------------------------------------------

    def _protocol(self) -> asyncio.BaseProtocol:
        with self._lock:
            self.connections += 1
            greeting, self._script.greeting = self._script.greeting, None
        if greeting is not None:
            return _Greeter(greeting)
        assert self._loop is not None
        return _TrackedSMTP(
            self,
            _Handler(self),
            hostname="localhost",
            ident="tidings-smtp-emulator",
            tls_context=self.certs.server_context() if self.security == "starttls" else None,
            auth_require_tls=self.security == "starttls",
            authenticator=self._authenticate,
            data_size_limit=self.size_limit,
            loop=self._loop,
        )

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if isinstance(data, LoginPassword) and self.credentials is not None:
            given = (data.login.decode(), data.password.decode())
            if given == self.credentials:
                return AuthResult(success=True, auth_data=given[0])
        return AuthResult(success=False, handled=False)

    def scripted(self, command: str) -> str | None:
        with self._lock:
            replies = self._script.replies.get(command)
            return replies.popleft() if replies else None

    def hang_for(self, command: str) -> float:
        with self._lock:
            return self._script.hangs.pop(command, 0.0)

    def take_drop(self) -> bool:
        with self._lock:
            drop, self._script.drop_data = self._script.drop_data, False
            return drop

    def start(self) -> SmtpEmulator:
        ready = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            context = self.certs.server_context() if self.security == "tls" else None
            server = loop.run_until_complete(
                loop.create_server(self._protocol, "127.0.0.1", 0, ssl=context)
            )
            self._server = server
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            self._shutdown(loop, server)

        self._thread = threading.Thread(target=run, name="SmtpEmulator", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("SMTP emulator did not start")
        return self

    def _shutdown(self, loop: asyncio.AbstractEventLoop, server: asyncio.Server) -> None:
        server.close()
        for protocol in list(self._live):
            transport = getattr(protocol, "transport", None)
            if transport is not None:
                transport.abort()
        loop.run_until_complete(_drain(server))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None
        if self._own_certs:
            self.certs.cleanup()

    def __enter__(self) -> SmtpEmulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


async def _drain(server: asyncio.Server) -> None:
    await server.wait_closed()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)


class _TrackedSMTP(SMTP):
    def __init__(self, emulator: SmtpEmulator, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._emulator = emulator

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._emulator._live.add(self)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._emulator._live.discard(self)
        super().connection_lost(exc)


class _Greeter(asyncio.Protocol):
    def __init__(self, reply: str) -> None:
        self.reply = reply

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).write(f"{self.reply}\r\n".encode())
        transport.close()


class _Handler:
    def __init__(self, emulator: SmtpEmulator) -> None:
        self.emu = emulator

    async def _before(self, command: str) -> str | None:
        hang = self.emu.hang_for(command)
        if hang:
            await asyncio.sleep(hang)
        return self.emu.scripted(command)

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        reply = await self._before("MAIL")
        if reply is not None:
            return reply
        if self.emu.credentials is not None and not session.authenticated:
            return "530 5.7.0 Authentication required"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 Ok"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        reply = await self._before("RCPT")
        if reply is not None:
            return reply
        refusal = self.emu.refused.get(address.lower())
        if refusal is not None:
            return refusal
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        reply = await self._before("DATA")
        if reply is not None:
            return reply
        if self.emu.take_drop():
            assert server.transport is not None
            server.transport.abort()
            return "421 4.4.2 connection dropped"  # never reaches the client
        transport = server.transport
        tls = transport is not None and transport.get_extra_info("sslcontext") is not None
        content = envelope.original_content or b""
        mail = Mail(str(envelope.mail_from), list(envelope.rcpt_tos), content, tls, _user(session))
        with self.emu._lock:
            self.emu.mails.append(mail)
            queued = len(self.emu.mails)
        return f"250 2.0.0 Ok: queued as {queued}"


def _user(session: Session) -> str | None:
    with contextlib.suppress(AttributeError):
        return cast(str | None, session.auth_data)
    return None
