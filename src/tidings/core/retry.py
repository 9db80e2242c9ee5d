"""When to try again (rule O2) and how long a provider's rate limit holds us back (O4).

Pure: imports only the standard library. Randomness (jitter) comes from an injected `rand`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

BACKOFF_FACTOR = 4
MAX_BACKOFF_S = 3600.0
MAX_RETRY_HINT_S = 3600.0
DEFAULT_RATE_LIMIT_DELAY_S = 60.0

# 4**40 * any sane base is far beyond the cap; a bounded exponent keeps the float finite.
_MAX_EXPONENT = 40
_DELTA_SECONDS = re.compile(r"-?\d+(\.\d+)?")


def backoff_s(attempts: int, base_s: float, rand: Callable[[], float]) -> float:
    """Delay after the `attempts`-th failed attempt: base ×4 per attempt, ±20 % jitter, ≤ 1 h."""
    exponent = min(max(attempts, 1) - 1, _MAX_EXPONENT)
    delay = max(base_s, 0.0) * float(BACKOFF_FACTOR) ** exponent
    # Jitter spreads retries of a burst that failed together over ±20 % of the delay.
    jittered = delay * (0.8 + 0.4 * rand())
    return min(jittered, MAX_BACKOFF_S)


def _clamp_hint(hint_s: float | None) -> float | None:
    if hint_s is None or math.isnan(hint_s):
        return None
    return min(max(hint_s, 0.0), MAX_RETRY_HINT_S)


def retry_delay_s(
    attempts: int, base_s: float, hint_s: float | None, rand: Callable[[], float]
) -> float:
    """O2: the backoff, or the provider's (clamped) retry hint when that is longer."""
    delay = backoff_s(attempts, base_s, rand)
    hint = _clamp_hint(hint_s)
    return delay if hint is None else max(delay, hint)


def rate_limit_delay_s(hint_s: float | None) -> float:
    """O4: how long a provider rate limit holds the channel: its hint, or 60 s without one."""
    hint = _clamp_hint(hint_s)
    return DEFAULT_RATE_LIMIT_DELAY_S if hint is None else hint


def exhausted(attempts: int, max_attempts: int) -> bool:
    """True when no attempt is left (max_attempts counts the first attempt)."""
    return attempts >= max_attempts


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from an HTTP `Retry-After` (delta-seconds or HTTP-date); None if unusable.

    A date in the past or a negative number means "now" (0.0); the result is at most 1 h.
    """
    if value is None:
        return None
    text = value.strip()
    if _DELTA_SECONDS.fullmatch(text):
        seconds = float(text)
    else:
        seconds_or_none = _seconds_until_date(text, now)
        if seconds_or_none is None:
            return None
        seconds = seconds_or_none
    return min(max(seconds, 0.0), MAX_RETRY_HINT_S)


def _seconds_until_date(text: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    # An HTTP-date is GMT; a naive value on either side is read as UTC.
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return (when - now).total_seconds()
