"""Token-bucket math for a channel's rate limit (rules C6, O4, D4).

Pure: imports only the standard library. The bucket lives in the database (one per channel,
so it holds cluster-wide); the store applies these functions inside its claim transaction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

#: What `available` reports for a channel without a rate limit (rate_per_min <= 0).
UNLIMITED = 1_000_000_000

# Float refills accumulate rounding error; a token within this of whole counts as whole.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Bucket:
    tokens: float
    updated_at: datetime
    paused_until: datetime | None = None  # set by a provider rate limit (O4)


def full(now: datetime, burst: int) -> Bucket:
    """A new channel's bucket: it starts full."""
    return Bucket(tokens=float(burst), updated_at=now)


def _paused(bucket: Bucket, now: datetime) -> bool:
    return bucket.paused_until is not None and now < bucket.paused_until


def _refill_origin(bucket: Bucket) -> datetime:
    """Tokens accrue from here: time spent paused earns nothing."""
    if bucket.paused_until is None:
        return bucket.updated_at
    return max(bucket.updated_at, bucket.paused_until)


def refill(bucket: Bucket, now: datetime, rate_per_min: float, burst: int) -> Bucket:
    """The bucket as of `now`: rate_per_min/60 tokens per second, never above `burst`.

    Nothing accrues while paused, and a clock that went backwards adds (and removes) nothing.
    """
    capped = min(max(bucket.tokens, 0.0), float(burst))
    if _paused(bucket, now):
        return replace(bucket, tokens=capped)
    if rate_per_min <= 0:
        return Bucket(tokens=float(burst), updated_at=max(bucket.updated_at, now))
    origin = _refill_origin(bucket)
    if now <= origin:
        return replace(bucket, tokens=capped)
    earned = (now - origin).total_seconds() * rate_per_min / 60.0
    # The pause is over once refilled past it, so it is cleared.
    return Bucket(tokens=min(capped + earned, float(burst)), updated_at=now)


def available(bucket: Bucket, now: datetime, rate_per_min: float, burst: int) -> int:
    """Whole tokens usable at `now`: how many rows (or digest messages) a claim may take."""
    if _paused(bucket, now):
        return 0
    if rate_per_min <= 0:
        return UNLIMITED
    return math.floor(refill(bucket, now, rate_per_min, burst).tokens + _EPSILON)


def take(bucket: Bucket, now: datetime, rate_per_min: float, burst: int, n: int) -> Bucket:
    """The bucket after spending `n` tokens at `now`; ValueError when fewer are available."""
    if n < 0:
        raise ValueError(f"cannot take a negative number of tokens ({n})")
    have = available(bucket, now, rate_per_min, burst)
    if n > have:
        raise ValueError(f"cannot take {n} tokens, {have} available")
    if rate_per_min <= 0:
        return replace(bucket, updated_at=max(bucket.updated_at, now))
    refilled = refill(bucket, now, rate_per_min, burst)
    # The epsilon above may let a token of 0.9999999999 be spent; never go below zero.
    return replace(refilled, tokens=max(refilled.tokens - n, 0.0))


def pause(bucket: Bucket, now: datetime, until: datetime) -> Bucket:
    """O4: the provider said "slow down": drain the bucket and hold it until `until`."""
    held = until if bucket.paused_until is None else max(bucket.paused_until, until)
    # max(): a clock that went backwards must not let time already counted be counted again.
    return Bucket(tokens=0.0, updated_at=max(bucket.updated_at, now), paused_until=held)


def next_token_at(bucket: Bucket, now: datetime, rate_per_min: float, burst: int) -> datetime:
    """The earliest time at or after `now` when at least one whole token is available."""
    if burst < 1:
        raise ValueError(f"a bucket of burst {burst} never holds a whole token")
    if available(bucket, now, rate_per_min, burst) >= 1:
        return now
    start = now if bucket.paused_until is None else max(now, bucket.paused_until)
    if rate_per_min <= 0:
        return start
    origin = _refill_origin(bucket)
    tokens = min(max(bucket.tokens, 0.0), float(burst))
    wait_s = (1.0 - tokens) * 60.0 / rate_per_min
    # Round up to whole microseconds (datetime resolution) so the token is there by then.
    ready = origin + timedelta(microseconds=math.ceil(wait_s * 1_000_000))
    return max(ready, start)
