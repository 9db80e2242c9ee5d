"""The e-mail message itself: multipart/alternative with text/plain first and text/html last
(the richest part last, RFC 2046), a `Message-ID` stable across retries, and shortening that
keeps the start of the text until the encoded message fits. Imports tidings.channels.base,
tidings.core and tidings.render.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import format_datetime, parseaddr
from typing import Final

from tidings.channels.base import Target
from tidings.core.model import Channel
from tidings.core.text import truncate_utf8
from tidings.render.flavours import escape_html

_POLICY: Final = SMTP_POLICY.clone(cte_type="7bit")  # no 8BITMIME needed from the server


def dated(payload: bytes, at: datetime) -> bytes:
    """The message as sent: its `Date` header, the attempt's time, put in front."""
    return f"Date: {format_datetime(at)}\r\n".encode() + payload


#: What `dated` adds: every date in RFC 5322 form has the same length.
DATE_LINE_BYTES: Final = len(dated(b"", datetime(2000, 1, 1, tzinfo=UTC)))


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


def shortened(
    channel: Channel, target: Target, subject: str, text: str, limit: int
) -> tuple[str, bytes]:
    """Cut the text (the start kept, marked) and show it as preformatted HTML, until the
    encoded message fits in `limit` bytes (its `Date` line not counted)."""
    budget = limit // 3
    while True:
        short = truncate_utf8(text, budget)
        html = f'<pre style="white-space: pre-wrap">{escape_html(short)}</pre>'
        payload = mime(channel, target, subject, short, html)
        if len(payload) <= limit or budget == 0:
            return short, payload
        budget = budget * 3 // 4


__all__ = ["DATE_LINE_BYTES", "dated", "mime", "shortened"]
