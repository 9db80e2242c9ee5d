"""Text that fits the database (rule O6): NUL and lone surrogates replaced, and truncation
on a character boundary with a visible marker, by UTF-8 bytes or by code points.

Pure: imports only the standard library.
"""

from __future__ import annotations

import re

LAST_ERROR_MAX_BYTES = 500
PROVIDER_RESPONSE_MAX_BYTES = 2000
MARKER = "…"
REPLACEMENT = "\ufffd"

# NUL: PostgreSQL text and jsonb cannot hold it. U+D800..U+DFFF: a Python str may carry lone
# surrogates (e.g. from os.fsdecode or surrogateescape), which have no UTF-8 encoding.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_unstorable(text: str) -> bool:
    """True when `text` holds a NUL or a lone surrogate, which no database column can store."""
    if text.isascii():  # the common case, answered from a flag and a memchr
        return "\x00" in text
    return _UNSTORABLE.search(text) is not None


def clean(text: str) -> str:
    """`text` with every NUL and lone surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def _utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` (clean) whose UTF-8 encoding has at most `max_bytes`."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    end = max(max_bytes, 0)
    # Step back over continuation bytes (0b10xxxxxx) so a multi-byte character is never split.
    while end > 0 and encoded[end] & 0xC0 == 0x80:
        end -= 1
    return encoded[:end].decode("utf-8")


def truncate_utf8(text: str, max_bytes: int, marker: str = MARKER) -> str:
    """`text` if its UTF-8 form fits in `max_bytes`; else a prefix plus `marker` that fits.

    Lone surrogates, which have no UTF-8 form, become U+FFFD first, so the result is always
    valid UTF-8 (NUL is valid UTF-8 and is left to `clean`). When even the marker does not
    fit, the longest prefix of the marker that does.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    text = _SURROGATE.sub(REPLACEMENT, text)
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    budget = max_bytes - len(marker.encode("utf-8"))
    if budget < 0:
        return _utf8_prefix(marker, max_bytes)
    return _utf8_prefix(text, budget) + marker


def truncate_chars(text: str, max_chars: int, marker: str = MARKER) -> str:
    """`text` if it has at most `max_chars` code points; else a prefix plus `marker` that fits."""
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    if len(text) <= max_chars:
        return text
    budget = max_chars - len(marker)
    if budget < 0:
        return marker[:max_chars]
    return text[:budget] + marker


def storable(text: str | None, max_bytes: int) -> str | None:
    """What the store writes for a free-text column: cleaned, then cut to `max_bytes` (O6)."""
    if text is None:
        return None
    if text.isascii() and "\x00" not in text and len(text) <= max_bytes:
        return text  # the usual short answer: nothing to clean or cut (no regex passes)
    return truncate_utf8(clean(text), max_bytes)


def ascii_digits(text: str) -> bool:
    """Whether `text` is a whole number written in ASCII digits. `str.isdigit()` alone also
    takes "²", which `int()` refuses, and "١٢", which it reads as 12: an id or a length from
    a request is checked with this before `int()`."""
    return text.isascii() and text.isdigit()
