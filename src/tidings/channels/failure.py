"""Exceptions raised while sending: the known ones (timeouts, refused connections, blocked
addresses, invalid targets) translated into outcomes, and the one catch-all for an exception
nobody expected; and a channel's secrets kept out of outcomes and logs.

An unexpected exception becomes a retry whose error is `"<ExceptionType>: <message>"`, scrubbed
of the channel's secrets and of every URL's query and userinfo; its traceback, scrubbed the
same way, goes to the server log once (logger `tidings.channels`, WARNING, naming the
channel) and never to the attempt row, which operators and API readers see.
Imports aiohttp (on the first failure), tidings.channels (http, netguard) and tidings.core.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import traceback
from collections.abc import Sequence
from typing import Any

from tidings.channels.http import MAX_ERROR_CHARS, InvalidTarget, RequestTimeout
from tidings.channels.netguard import BlockedAddress
from tidings.core.outcome import Outcome, Reason, Reject, Retry
from tidings.core.redact import scrub, scrub_text
from tidings.core.text import truncate_chars

log = logging.getLogger("tidings.channels")


@functools.cache
def _aiohttp_errors() -> tuple[type[Exception], tuple[type[Exception], ...]]:
    """aiohttp's invalid URL, and the connection errors: imported on the first failure (a
    send has imported aiohttp by then), not with the channel kinds."""
    import aiohttp

    connection = (
        aiohttp.ClientConnectionError,  # ClientConnectorError, ClientOSError, ServerDisconnected…
        aiohttp.ClientPayloadError,
        OSError,  # ConnectionError and the socket errors aiohttp lets through unwrapped
    )
    return aiohttp.InvalidURL, connection


def outcome_for_exception(error: BaseException) -> Outcome | None:
    """Translate an exception raised while sending into an outcome (STYLE 11); None for one
    that is no failure of the send itself (a bug), which the caller's catch-all reports.

    Messages never hold a URL's query or userinfo: every URL in them is redacted.
    """
    blocked = _find_blocked(error)
    if blocked is not None:
        return Reject(Reason.BLOCKED_ADDRESS, str(blocked))
    invalid_url, connection_errors = _aiohttp_errors()
    if isinstance(error, InvalidTarget | invalid_url):
        return Reject(Reason.INVALID_TARGET, scrub(f"invalid target: {error}"))
    # Before the connection errors: aiohttp's ServerTimeoutError is both.
    if isinstance(error, TimeoutError):
        return Retry(
            Reason.TIMEOUT, str(error) if isinstance(error, RequestTimeout) else "timed out"
        )
    if isinstance(error, connection_errors):
        detail = str(error) or type(error).__name__
        return Retry(Reason.CONNECTION, scrub(f"connection failed: {detail}"))
    return None


def _find_blocked(error: BaseException) -> BlockedAddress | None:
    """The BlockedAddress behind `error`, however it was wrapped (cause, context, os_error).

    aiohttp 3.14 lets a resolver's non-OSError exception through unwrapped, but wraps
    OSErrors in ClientConnectorDNSError; searching the chain holds either way.
    """
    seen: set[int] = set()
    pending: list[object] = [error]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        if isinstance(current, BlockedAddress):
            return current
        seen.add(id(current))
        pending += [getattr(current, "os_error", None), current.__cause__, current.__context__]
    return None


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


__all__ = ["outcome_for_exception", "scrub_secrets", "unexpected_failure"]
