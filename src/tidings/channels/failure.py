"""A channel's secrets kept out of outcomes and logs, and the one catch-all for an exception
nobody expected while sending.

An unexpected exception becomes a retry whose error is `"<ExceptionType>: <message>"`, scrubbed
of the channel's secrets and of every URL's query and userinfo; its traceback, scrubbed the
same way, goes to the server log once (logger `tidings.channels`, WARNING, naming the
channel) and never to the attempt row, which operators and API readers see.
Imports tidings.channels.http and tidings.core.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Sequence
from typing import Any

from tidings.channels.http import MAX_ERROR_CHARS
from tidings.core.outcome import Outcome, Reason, Retry
from tidings.core.redact import scrub, scrub_text
from tidings.core.text import truncate_chars

log = logging.getLogger("tidings.channels")


def scrub_secrets(outcome: Outcome, secrets: Sequence[str]) -> Outcome:
    """No secret reaches an error, an attempt row or a log: each is replaced with its mask.
    `secrets` longest first (as `Adapter.secrets_of` gives them)."""
    changes: dict[str, Any] = {}
    for field in ("error", "provider_response"):
        text = getattr(outcome, field, None)
        if isinstance(text, str) and text:
            cleaned = scrub_text(text, secrets)
            if cleaned != text:
                changes[field] = cleaned
    return dataclasses.replace(outcome, **changes) if changes else outcome


def unexpected_failure(error: BaseException, *, channel: str, secrets: Sequence[str]) -> Retry:
    """A retry for an exception no adapter translated; its scrubbed traceback is logged."""
    words = scrub_text(scrub(f"{type(error).__name__}: {error}"), secrets)
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    log.warning(
        "channel %r: unexpected error while sending\n%s",
        channel,
        scrub_text(scrub("".join(lines)), secrets),
    )
    return Retry(Reason.UNEXPECTED, truncate_chars(words, MAX_ERROR_CHARS))


__all__ = ["scrub_secrets", "unexpected_failure"]
