"""The `email` kind: SMTP submission with aiosmtplib (channels.md §9).

Owns the MIME message (multipart/alternative: text/plain first, text/html last), the SMTP
reply table, per-recipient outcomes, and the outbound-safety check of the SMTP host: every
address the host resolves to must be public or allowed, and the peer actually connected to is
checked again before any SMTP command is sent (nothing but a TLS hello, with implicit TLS, goes
out before that check). Imports aiosmtplib, tidings.channels (base, chat, http, netguard),
tidings.core and tidings.render.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import socket
import ssl
import traceback
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import format_datetime, parseaddr
from typing import Any, ClassVar, Final

import aiosmtplib

from tidings.channels.base import Adapter, Limits, Message, SendContext, Target
from tidings.channels.chat import scrub_secrets
from tidings.channels.http import MAX_ERROR_CHARS
from tidings.channels.netguard import BlockedAddress, Network, is_allowed
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome, Partial, Reason, Reject, Retry
from tidings.core.states import AttemptStatus
from tidings.core.text import truncate_chars, truncate_utf8
from tidings.render import Flavour, default_renderer
from tidings.render.flavours import escape_html

MAX_MESSAGE_BYTES: Final = 1_048_576
#: No standard rate: providers signal throttling with 4yz replies. 30/min stays well under the
#: hourly quotas of common submission services.
DEFAULT_RATE_PER_MIN: Final = 30.0
MAX_RECIPIENTS: Final = 100
#: How long a goodbye (QUIT) may take once the message was accepted.
QUIT_TIMEOUT_S: Final = 1.0
SECURITY_PORTS: Final[Mapping[str, int]] = {"starttls": 587, "tls": 465, "none": 25}

#: SMTP reply code → what it means for the message (RFC 5321 §4.2, RFC 4954 for AUTH).
REPLY_CODES: Final[Mapping[int, tuple[AttemptStatus, Reason]]] = {
    421: (AttemptStatus.RETRYABLE, Reason.SERVER_ERROR),  # service not available, closing
    450: (AttemptStatus.RETRYABLE, Reason.SERVER_ERROR),  # mailbox busy (greylisting)
    451: (AttemptStatus.RETRYABLE, Reason.SERVER_ERROR),  # local error in processing
    452: (AttemptStatus.RETRYABLE, Reason.SERVER_ERROR),  # insufficient storage
    454: (AttemptStatus.RETRYABLE, Reason.AUTH),  # temporary authentication failure
    500: (AttemptStatus.PERMANENT, Reason.CLIENT_ERROR),
    501: (AttemptStatus.PERMANENT, Reason.CLIENT_ERROR),
    502: (AttemptStatus.PERMANENT, Reason.CLIENT_ERROR),
    503: (AttemptStatus.PERMANENT, Reason.CLIENT_ERROR),
    504: (AttemptStatus.PERMANENT, Reason.CLIENT_ERROR),
    530: (AttemptStatus.PERMANENT, Reason.AUTH),  # authentication required
    534: (AttemptStatus.PERMANENT, Reason.AUTH),  # mechanism too weak
    535: (AttemptStatus.PERMANENT, Reason.AUTH),  # credentials invalid
    538: (AttemptStatus.PERMANENT, Reason.AUTH),  # encryption required
    550: (AttemptStatus.PERMANENT, Reason.INVALID_TARGET),  # mailbox unavailable
    551: (AttemptStatus.PERMANENT, Reason.INVALID_TARGET),  # user not local
    552: (AttemptStatus.PERMANENT, Reason.TOO_LARGE),  # storage / size exceeded
    553: (AttemptStatus.PERMANENT, Reason.INVALID_TARGET),  # mailbox name not allowed
    554: (AttemptStatus.PERMANENT, Reason.VENDOR_ERROR),  # transaction failed
}

_POLICY: Final = SMTP_POLICY.clone(cte_type="7bit")  # no 8BITMIME needed from the server
_HOST = re.compile(r"[A-Za-z0-9.-]+|\[?[0-9A-Fa-f:.]+\]?")
_STEPS: Final[Mapping[type[Exception], str]] = {
    aiosmtplib.SMTPConnectResponseError: "greeting",
    aiosmtplib.SMTPHeloError: "EHLO refused",
    aiosmtplib.SMTPAuthenticationError: "AUTH refused",
    aiosmtplib.SMTPSenderRefused: "MAIL FROM refused",
    aiosmtplib.SMTPDataError: "DATA refused",
}


def allowed_networks(ctx: SendContext) -> tuple[Network, ...]:
    """The SMTP host obeys the same TIDINGS_ALLOWED_PRIVATE_NETWORKS as webhook targets."""
    return ctx.http.allowed_networks


class EmailAdapter(Adapter):
    kind: ClassVar[str] = "email"
    limits: ClassVar[Limits] = Limits(
        max_message_size=MAX_MESSAGE_BYTES,
        size_unit="bytes",
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        flavour=Flavour.HTML.value,
    )
    spec: ClassVar[KindSpec] = KindSpec(
        kind="email",
        description="Email through an SMTP server (HTML and text parts)",
        fields=(
            ConfigField(
                "host",
                FieldType.STRING,
                "SMTP server host name or IP",
                required=True,
                label="SMTP host",
            ),
            ConfigField(
                "port",
                FieldType.INTEGER,
                "SMTP port; 587, 465 or 25 by security",
                minimum=1,
                maximum=65535,
            ),
            ConfigField(
                "security",
                FieldType.CHOICE,
                "How the connection is protected",
                default="starttls",
                choices=tuple(SECURITY_PORTS),
            ),
            ConfigField("username", FieldType.STRING, "SMTP login, when the server wants one"),
            ConfigField("password", FieldType.STRING, "SMTP password", secret=True),
            ConfigField("sender", FieldType.STRING, "The From address", required=True),
            ConfigField("recipients", FieldType.STRING_LIST, "The To addresses", required=True),
            ConfigField(
                "verify",
                FieldType.BOOLEAN,
                "Check the server's TLS certificate",
                default=True,
                label="Verify TLS",
            ),
            ConfigField(
                "ca_file",
                FieldType.STRING,
                "A CA bundle to verify the server with",
                label="CA file",
            ),
            ConfigField("helo_name", FieldType.STRING, "The name given in EHLO", label="HELO name"),
        ),
        flavour=Flavour.HTML.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_body_bytes=MAX_MESSAGE_BYTES,
    )
    secret_fields: ClassVar[tuple[str, ...]] = ("password",)

    # -- configuration --------------------------------------------------------------------

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        checked = dict(config)
        host = config.get("host")
        if not isinstance(host, str) or not _HOST.fullmatch(host):
            raise ValidationError("config.host", "must be a host name or IP address")
        security = config.get("security", "starttls")
        if security not in SECURITY_PORTS:
            raise ValidationError("config.security", "must be starttls, tls or none")
        checked["security"] = security
        port = config.get("port", SECURITY_PORTS[security])
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValidationError("config.port", "must be a port number 1..65535")
        checked["port"] = port
        _check_credentials(config, security)
        checked["sender"] = _address("config.sender", config.get("sender"))
        checked["recipients"] = _recipients(config.get("recipients"))
        for key in ("verify",):
            if not isinstance(config.get(key, True), bool):
                raise ValidationError(f"config.{key}", "must be true or false")
        for key in ("ca_file", "helo_name"):
            value = config.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValidationError(f"config.{key}", "must be a non-empty string")
        return checked

    # -- rendering ------------------------------------------------------------------------

    def render(
        self,
        channel: Channel,
        target: Target,
        events: Sequence[Event],
        *,
        shorten_to: int | None = None,
        part: int = 1,
        parts: int = 1,
    ) -> Message:
        renderer = default_renderer()
        if target.batch_id is None:
            subject = events[0].title or events[0].kind
            text = renderer.event(Flavour.TEXT, channel, events[0])
            html = renderer.event(Flavour.HTML, channel, events[0])
        else:
            subject = f"{len(events)} events" + (f" ({part}/{parts})" if parts > 1 else "")
            text = renderer.digest(Flavour.TEXT, channel, events, part=part, parts=parts)
            html = renderer.digest(Flavour.HTML, channel, events, part=part, parts=parts)
        payload = mime(channel, target, subject, text, html)
        if shorten_to is not None and len(payload) > shorten_to:
            text, payload = _shortened(channel, target, subject, text, shorten_to)
        return Message(
            target=target,
            payload=payload,
            size=len(payload),
            content_type="message/rfc822",
            title=subject,
            text=text,
        )

    # -- sending --------------------------------------------------------------------------

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        try:
            outcome = await self._deliver(ctx, channel, message)
        except TimeoutError:
            outcome = Retry(Reason.TIMEOUT, f"timed out after {channel.timeout_s:g} s")
        except Exception as error:  # translated at the boundary into an outcome
            outcome = outcome_for_smtp_error(error, str(channel.config.get("host")))
        password = channel.config.get("password")
        # A very short password would turn every matching letter of an error into a mask.
        secrets = [password] if isinstance(password, str) and len(password) >= 6 else []
        return scrub_secrets(outcome, secrets)

    async def _deliver(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
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
                outcome = await _transaction(smtp, ctx, config, message.payload)
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
    await _check_host(host, int(config["port"]), allowed)
    await smtp.connect()
    peer = str(smtp.get_transport_info("peername")[0])
    if not is_allowed(peer, allowed):
        raise BlockedAddress(host, peer)
    if security == "starttls":
        await smtp.starttls()
    if config.get("username"):
        await smtp.login(str(config["username"]), str(config.get("password") or ""))
    recipients = [parseaddr(r)[1] for r in config["recipients"]]
    dated = f"Date: {format_datetime(ctx.attempt_at)}\r\n".encode() + payload
    refused, reply = await smtp.sendmail(parseaddr(config["sender"])[1], recipients, dated)
    return _accepted(refused, reply, recipients)


# --- configuration helpers ----------------------------------------------------------------------


def _check_credentials(config: Mapping[str, Any], security: str) -> None:
    username, password = config.get("username"), config.get("password")
    for key, value in (("username", username), ("password", password)):
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"config.{key}", "must be a string")
    if bool(username) != bool(password):
        raise ValidationError("config.password", "username and password go together")
    if password and security == "none":
        raise ValidationError(
            "config.security", "a password is never sent unencrypted; use starttls or tls"
        )


def _address(field: str, value: object) -> str:
    if not isinstance(value, str) or "\r" in value or "\n" in value:
        raise ValidationError(field, "must be an email address")
    _, bare = parseaddr(value)
    if "@" not in bare or " " in bare or bare.startswith("@") or bare.endswith("@"):
        raise ValidationError(field, "must be an email address")
    return value


def _recipients(value: object) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ValidationError("config.recipients", "must be a non-empty list of addresses")
    if len(items) > MAX_RECIPIENTS:
        raise ValidationError("config.recipients", f"at most {MAX_RECIPIENTS} addresses")
    return [_address("config.recipients", str(item).strip()) for item in items]


class TlsSetupError(Exception):
    """The TLS settings cannot be used (an unreadable `ca_file`): retrying cannot help."""


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


# --- the message ----------------------------------------------------------------------------


def mime(channel: Channel, target: Target, subject: str, text: str, html: str) -> bytes:
    """The message without `Date` (set per attempt); `Message-ID` is stable across retries."""
    message = EmailMessage(policy=_POLICY)
    message["Subject"] = " ".join(subject.split()) or "(no subject)"
    message["From"] = str(channel.config["sender"])
    message["To"] = ", ".join(channel.config["recipients"])
    message["Message-ID"] = _message_id(channel, target)
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no auto-replies to it
    message.set_content(text)
    message.add_alternative(_document(html), subtype="html")
    # Deterministic, so a message renders to the same bytes every time; "=_" never occurs in
    # quoted-printable or base64 parts.
    digest = hashlib.sha256(f"{text}\0{html}".encode()).hexdigest()[:24]
    message.set_boundary(f"=_tidings_{digest}")
    return message.as_bytes()


def _document(body: str) -> str:
    head = '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>'
    return f"{head}\n{body}\n</body></html>\n"


def _message_id(channel: Channel, target: Target) -> str:
    # The channel's creation time keeps ids of a re-created database from repeating old ones
    # (mail clients hide a message whose id they have seen).
    seed = f"{channel.id}:{channel.created_at.isoformat()}".encode()
    tag = hashlib.sha256(seed).hexdigest()[:12]
    domain = parseaddr(str(channel.config["sender"]))[1].rpartition("@")[2] or "tidings"
    return f"<{target.message_id}.{tag}@{domain}>"


def _shortened(
    channel: Channel, target: Target, subject: str, text: str, limit: int
) -> tuple[str, bytes]:
    """Cut the text (the start kept, marked) and show it as preformatted HTML, until the
    encoded message fits."""
    budget = limit // 3
    while True:
        short = truncate_utf8(text, budget)
        html = f'<pre style="white-space: pre-wrap">{escape_html(short)}</pre>'
        payload = mime(channel, target, subject, short, html)
        if len(payload) <= limit or budget == 0:
            return short, payload
        budget = budget * 3 // 4


# --- outbound safety --------------------------------------------------------------------------


async def _check_host(host: str, port: int, allowed: Sequence[Network]) -> None:
    """Every address `host` resolves to must be allowed: aiosmtplib may connect to any."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    for info in infos:
        address = str(info[4][0])
        if not is_allowed(address, allowed):
            raise BlockedAddress(host, address)


# --- outcomes --------------------------------------------------------------------------------


def _accepted(
    refused: Mapping[str, aiosmtplib.SMTPResponse], reply: str, recipients: Sequence[str]
) -> Outcome:
    if not refused:
        return Delivered(provider_response=reply)
    named = "; ".join(f"{who}: {answer.code} {answer.message}" for who, answer in refused.items())
    error = f"{len(refused)} of {len(recipients)} recipients refused: {named}"
    return Partial(truncate_chars(error, MAX_ERROR_CHARS), provider_response=reply)


def rule_for_reply(code: int) -> tuple[AttemptStatus, Reason]:
    if code in REPLY_CODES:
        return REPLY_CODES[code]
    if 400 <= code <= 499:
        return AttemptStatus.RETRYABLE, Reason.SERVER_ERROR
    if 500 <= code <= 599:
        return AttemptStatus.PERMANENT, Reason.VENDOR_ERROR
    return AttemptStatus.RETRYABLE, Reason.UNEXPECTED


def _by_code(code: int, error: str) -> Outcome:
    kind, reason = rule_for_reply(code)
    error = truncate_chars(error, MAX_ERROR_CHARS)
    if kind is AttemptStatus.PERMANENT:
        return Reject(reason, error)
    return Retry(reason, error)


def outcome_for_smtp_error(error: BaseException, host: str) -> Outcome:
    """Translate what aiosmtplib (or the resolver, or the guard) raised into an outcome."""
    if isinstance(error, BlockedAddress):
        return Reject(Reason.BLOCKED_ADDRESS, str(error))
    if isinstance(error, TlsSetupError):
        return Reject(Reason.CLIENT_ERROR, str(error))
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        return _all_refused(error.recipients)
    if isinstance(error, aiosmtplib.SMTPResponseException):
        step = next((s for t, s in _STEPS.items() if isinstance(error, t)), "refused")
        return _by_code(error.code, f"SMTP {step}: {error.code} {error.message}")
    verify = _find(error, ssl.SSLCertVerificationError)
    if verify is not None:
        detail = verify.verify_message or str(verify)
        return Reject(Reason.AUTH, f"TLS: the certificate of {host} is not trusted: {detail}")
    if isinstance(error, aiosmtplib.SMTPNotSupported) or type(error) is aiosmtplib.SMTPException:
        return Reject(Reason.CLIENT_ERROR, f"SMTP: {error}")
    if isinstance(error, TimeoutError):
        return Retry(Reason.TIMEOUT, f"SMTP: {error or 'timed out'}")
    if isinstance(error, socket.gaierror):
        return Retry(Reason.CONNECTION, f"cannot resolve {host}: {error}")
    if isinstance(error, ConnectionError | OSError | aiosmtplib.SMTPServerDisconnected):
        return Retry(Reason.CONNECTION, f"SMTP connection failed: {error or type(error).__name__}")
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    return Retry(
        Reason.UNEXPECTED,
        truncate_chars(f"{type(error).__name__}: {error}", MAX_ERROR_CHARS),
        provider_response="".join(lines),
    )


def _all_refused(refusals: Sequence[aiosmtplib.SMTPRecipientRefused]) -> Outcome:
    """No recipient accepted: a retry when any refusal was transient (4yz), else permanent."""
    named = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in refusals)
    error = f"every recipient refused: {named}"
    transient = [r for r in refusals if rule_for_reply(r.code)[0] is not AttemptStatus.PERMANENT]
    if transient:
        return _by_code(transient[0].code, error)
    return _by_code(refusals[0].code, error)


def _find(error: BaseException, kind: type[ssl.SSLCertVerificationError]) -> Any:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


__all__ = [
    "REPLY_CODES",
    "EmailAdapter",
    "allowed_networks",
    "mime",
    "outcome_for_smtp_error",
    "rule_for_reply",
]
