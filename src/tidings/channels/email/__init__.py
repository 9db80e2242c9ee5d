"""The `email` kind: SMTP submission with aiosmtplib (channels.md §9).

Owns the kind's declaration, its config rules and normalisations (the port from the
security, recipients given as "a, b"), rendering and sending; the message is built in `mime`,
the SMTP exchange and its address checks live in `smtp`, and replies are classified in
`replies`. Imports tidings.channels (base, email.*), tidings.core and tidings.render.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from email.utils import parseaddr
from typing import Any, ClassVar, Final

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.email.mime import DATE_LINE_BYTES, mime, shortened
from tidings.channels.email.replies import REPLY_CODES, outcome_for_smtp_error, rule_for_reply
from tidings.channels.email.smtp import allowed_networks, deliver
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome, Reason, Retry
from tidings.render import Flavour, default_renderer

MAX_MESSAGE_BYTES: Final = 1_048_576
#: No standard rate: providers signal throttling with 4yz replies. 30/min stays well under the
#: hourly quotas of common submission services.
DEFAULT_RATE_PER_MIN: Final = 30.0
MAX_RECIPIENTS: Final = 100
SECURITY_PORTS: Final[Mapping[str, int]] = {"starttls": 587, "tls": 465, "none": 25}
_HOST = re.compile(r"[A-Za-z0-9.-]+|\[?[0-9A-Fa-f:.]+\]?")

FIELDS: Final = (
    ConfigField(
        "host",
        FieldType.STRING,
        "The SMTP server's host name or IP address.",
        True,
        destination=True,
        label="SMTP host",
    ),
    ConfigField(
        "port",
        FieldType.INTEGER,
        "The server's port; when absent, 587 for starttls, 465 for tls and 25 for none.",
        minimum=1,
        maximum=65535,
        destination=True,
    ),
    ConfigField(
        "security",
        FieldType.CHOICE,
        "How the connection is encrypted: starttls (port 587), tls (implicit, port 465) or "
        "none (then no password is sent).",
        default="starttls",
        choices=tuple(SECURITY_PORTS),
        destination=True,
    ),
    ConfigField("username", FieldType.STRING, "The SMTP AUTH user; set with a password."),
    ConfigField(
        "password",
        FieldType.STRING,
        "The SMTP AUTH password; sent only over starttls or tls.",
        secret=True,
    ),
    ConfigField(
        "sender", FieldType.STRING, "The From address, e.g. Tidings <alerts@example.com>.", True
    ),
    ConfigField(
        "recipients",
        FieldType.STRING_LIST,
        f"The To addresses: a list, or one string separated by commas (at most {MAX_RECIPIENTS}).",
        True,
    ),
    ConfigField(
        "verify",
        FieldType.BOOLEAN,
        "Check the server's TLS certificate; turn it off only for a test server.",
        default=True,
        destination=True,  # without it, anyone on the path can be the server
        label="Verify certificate",
    ),
    ConfigField(
        "ca_file",
        FieldType.STRING,
        "A PEM file on this host of the CAs to trust for the server's certificate, instead "
        "of the system's.",
        destination=True,
        label="CA file",
    ),
    ConfigField(
        "helo_name",
        FieldType.STRING,
        "The name this host gives in EHLO; the local host name when absent.",
        label="HELO name",
    ),
)


class EmailAdapter(Adapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="email",
        description="E-mail through an SMTP submission server (STARTTLS, TLS or plain).",
        fields=FIELDS,
        flavour=Flavour.HTML.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_body_bytes=MAX_MESSAGE_BYTES,
        example={
            "host": "smtp.example.com",
            "username": "alerts",
            "password": "your-password",
            "sender": "Tidings <alerts@example.com>",
            "recipients": ["ops@example.com"],
        },
    )

    # -- configuration --------------------------------------------------------------------

    def destinations(self, config: Mapping[str, Any]) -> list[tuple[str, str]]:
        host = config.get("host")
        return [("host", host)] if isinstance(host, str) else []

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        if not _HOST.fullmatch(config["host"]):
            raise ValidationError("config.host", "must be a host name or IP address")
        security = config.setdefault("security", "starttls")
        config.setdefault("port", SECURITY_PORTS[security])
        _check_credentials(config, security)
        config["sender"] = _address("config.sender", config["sender"])
        config["recipients"] = _recipients(config["recipients"])
        return config

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
        # Measured as sent: with the Date line each attempt puts in front.
        payload = mime(channel, target, subject, text, html)
        if shorten_to is not None and len(payload) + DATE_LINE_BYTES > shorten_to:
            budget = max(shorten_to - DATE_LINE_BYTES, 0)
            text, payload = shortened(channel, target, subject, text, budget)
        return Message(
            target=target,
            payload=payload,
            size=len(payload) + DATE_LINE_BYTES,
            content_type="message/rfc822",
            title=subject,
            text=text,
        )

    # -- sending --------------------------------------------------------------------------

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        try:
            outcome = await deliver(ctx, channel, message.payload)
        except TimeoutError:
            outcome = Retry(Reason.TIMEOUT, f"timed out after {channel.timeout_s:g} s")
        except Exception as error:  # translated at the boundary into an outcome
            outcome = self.failure(error, channel)
        return self.scrubbed(outcome, channel)

    def translate(self, error: Exception, channel: Channel) -> Outcome | None:
        return outcome_for_smtp_error(error, str(channel.config.get("host")))


def _check_credentials(config: Mapping[str, Any], security: str) -> None:
    if bool(config.get("username")) != bool(config.get("password")):
        raise ValidationError("config.password", "username and password go together")
    if config.get("password") and security == "none":
        raise ValidationError(
            "config.security", "a password is never sent unencrypted; use starttls or tls"
        )


def _address(field: str, value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValidationError(field, "must be an email address")
    _, bare = parseaddr(value)
    if "@" not in bare or " " in bare or bare.startswith("@") or bare.endswith("@"):
        raise ValidationError(field, "must be an email address")
    return value


def _recipients(value: str | list[str]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    if len(items) > MAX_RECIPIENTS:
        raise ValidationError("config.recipients", f"at most {MAX_RECIPIENTS} addresses")
    return [_address("config.recipients", item.strip()) for item in items]


__all__ = [
    "REPLY_CODES",
    "EmailAdapter",
    "allowed_networks",
    "mime",
    "outcome_for_smtp_error",
    "rule_for_reply",
]
