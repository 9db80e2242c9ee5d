"""Message ids (N1): the id a receiver sees (`webhook-id`, an email's Message-ID, the inbox),
unique across databases and stable across a message's retries.

Pure: the random bytes come from the caller (the store draws them when it stores a delivery,
a test send when it sends). A digest part's id is derived from its entries' ids, so the same
entries retried keep the same id and a different cut of them gets another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

PREFIX = "msg_"
#: Random bytes per id: 128 bits, so two databases never draw the same id.
RANDOM_BYTES = 16
#: The longest id: the prefix and the hex of RANDOM_BYTES (a digest id is as long).
MAX_CHARS = len(PREFIX) + 2 * RANDOM_BYTES


def from_random(raw: bytes) -> str:
    """One id from RANDOM_BYTES random bytes."""
    if len(raw) != RANDOM_BYTES:
        raise ValueError(f"a message id takes {RANDOM_BYTES} random bytes, not {len(raw)}")
    return PREFIX + raw.hex()


def many_from_random(raw: bytes) -> list[str]:
    """len(raw) // RANDOM_BYTES ids from one draw (one system call for a whole batch)."""
    if len(raw) % RANDOM_BYTES:
        raise ValueError(f"random bytes for ids come in multiples of {RANDOM_BYTES}")
    text = raw.hex()
    step = 2 * RANDOM_BYTES
    return [PREFIX + text[at : at + step] for at in range(0, len(text), step)]


def for_digest(entry_ids: Sequence[str]) -> str:
    """The id of a digest message holding these entries (their own message ids, in order)."""
    if not entry_ids:
        raise ValueError("a digest message has at least one entry")
    digest = hashlib.sha256(("digest:" + ",".join(entry_ids)).encode()).hexdigest()
    return PREFIX + digest[: 2 * RANDOM_BYTES]
