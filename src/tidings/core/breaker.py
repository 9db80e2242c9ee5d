"""A channel's health and circuit breaker (rule H1): pure decisions of (health, now).

Pure: imports only the standard library. The health lives in the database (one row per
channel, so the breaker holds cluster-wide); the store applies these functions when a claim
asks what it may lease and when a claim's outcomes are recorded.

closed → open after `failures` consecutive retryable failures: the channel's due rows wait
(no attempts spent, no sends). Once its backoff has passed, one probe delivery is leased
(half_open); a success closes the breaker, a failure opens it again with the backoff doubled
(30 s up to 15 min). Failing without a success for `disable_after_s` disables the channel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

FIRST_BACKOFF_S = 30.0
MAX_BACKOFF_S = 900.0
DEFAULT_FAILURES = 5
DEFAULT_DISABLE_AFTER_S = 5 * 86400.0


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Policy:
    #: Consecutive retryable failures that open the breaker.
    failures: int = DEFAULT_FAILURES
    #: Continuous failure (no success) after which the channel is disabled.
    disable_after_s: float = DEFAULT_DISABLE_AFTER_S
    #: The wait before the first probe; it doubles after each failed probe, up to the max.
    first_backoff_s: float = FIRST_BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S


@dataclass(frozen=True, slots=True)
class Health:
    state: BreakerState = BreakerState.CLOSED
    consecutive_failures: int = 0
    #: The first failure since the last success; None while healthy.
    failing_since: datetime | None = None
    #: open: when the probe may go; half_open: when the probe's lease ends.
    until: datetime | None = None
    #: The wait the breaker last opened for (0 until it first opens); doubled when a probe
    #: fails.
    backoff_s: float = 0.0
    last_error: str | None = None


HEALTHY = Health()


class Admission(StrEnum):
    ALL = "all"  # lease as the rate allows
    PROBE = "probe"  # lease one row, the probe
    NONE = "none"  # lease nothing now


def admits(health: Health, now: datetime) -> Admission:
    """What a claim may lease now. A probe whose lease ran out (its worker died) is
    replaced by another once that lease has ended."""
    if health.state is BreakerState.CLOSED:
        return Admission.ALL
    if health.until is not None and now < health.until:
        return Admission.NONE
    return Admission.PROBE


def probing(health: Health, now: datetime, lease_s: float) -> Health:
    """The health while a probe is out: no other claim leases until its lease ends."""
    return replace(health, state=BreakerState.HALF_OPEN, until=now + timedelta(seconds=lease_s))


def after_success(health: Health) -> Health:
    return HEALTHY if health != HEALTHY else health


def after_failures(health: Health, count: int, error: str, now: datetime, policy: Policy) -> Health:
    """`count` retryable failures in a row: the breaker opens at the threshold, or again
    (backoff doubled) when the probe failed."""
    failing = replace(
        health,
        consecutive_failures=health.consecutive_failures + count,
        failing_since=health.failing_since or now,
        last_error=error,
    )
    if health.state is BreakerState.HALF_OPEN:
        backoff = min(max(health.backoff_s, policy.first_backoff_s) * 2, policy.max_backoff_s)
        return _open(failing, now, backoff)
    if health.state is BreakerState.CLOSED and failing.consecutive_failures >= policy.failures:
        return _open(failing, now, policy.first_backoff_s)
    return failing


def _open(health: Health, now: datetime, backoff_s: float) -> Health:
    until = now + timedelta(seconds=backoff_s)
    return replace(health, state=BreakerState.OPEN, until=until, backoff_s=backoff_s)


def should_disable(health: Health, now: datetime, policy: Policy) -> bool:
    """Failing without a success for `disable_after_s`."""
    if health.failing_since is None:
        return False
    return (now - health.failing_since).total_seconds() >= policy.disable_after_s


def opened(before: Health, after: Health) -> bool:
    return before.state is BreakerState.CLOSED and after.state is BreakerState.OPEN


def recovered(before: Health, after: Health) -> bool:
    return before.state is not BreakerState.CLOSED and after.state is BreakerState.CLOSED
