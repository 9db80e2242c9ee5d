"""The history's opaque page cursor (M2): where a page starts, which way it reads, and the
page number it leads to, as URL-safe base64 of a small JSON document.

A cursor is a position, not a snapshot: rows published after it was made are not skipped and
do not shift the pages already read, since each page starts strictly after a delivery id.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from tidings.core.errors import ValidationError

#: Longer input is not a cursor this server made (ours are under 80 characters).
MAX_CURSOR_CHARS = 200
_VERSION = 1
_MAX_ID = 2**63 - 1
_MAX_PAGE = 2**31


class BadCursor(ValidationError):
    """A cursor this server did not make, or made by a different version of it."""

    code = "bad_cursor"
    status = 400

    def __init__(self) -> None:
        super().__init__("cursor", "not a cursor from a history answer; start again without one")


@dataclass(frozen=True, slots=True)
class Cursor:
    #: The page holds rows strictly older (lower id) than this one, or strictly newer.
    after_id: int
    older: bool
    #: The page number the cursor leads to (for display; rows published since shift it).
    page: int


def encode(cursor: Cursor) -> str:
    doc = {"v": _VERSION, "id": cursor.after_id, "o": int(cursor.older), "p": cursor.page}
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode(text: str) -> Cursor:
    """The cursor `text` encodes, or BadCursor: never any other exception."""
    if not text or len(text) > MAX_CURSOR_CHARS or not text.isascii():
        raise BadCursor()
    try:
        doc = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError):
        raise BadCursor() from None
    if not isinstance(doc, dict) or set(doc) != {"v", "id", "o", "p"} or doc["v"] != _VERSION:
        raise BadCursor()
    after_id, older, page = doc["id"], doc["o"], doc["p"]
    if not all(type(v) is int for v in (after_id, older, page)):
        raise BadCursor()
    if not (0 <= after_id <= _MAX_ID and older in (0, 1) and 1 <= page <= _MAX_PAGE):
        raise BadCursor()
    return Cursor(after_id=after_id, older=bool(older), page=page)
