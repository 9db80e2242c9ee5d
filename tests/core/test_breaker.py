"""H1's decisions, pure: when the breaker opens, what a claim may lease, when it probes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tidings.core import breaker
from tidings.core.breaker import HEALTHY, Admission, BreakerState, Policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = Policy(failures=5, disable_after_s=3600, first_backoff_s=30, max_backoff_s=100)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_retryable_failures_open_the_breaker_at_the_threshold() -> None:
    four = breaker.after_failures(HEALTHY, 4, "HTTP 500", T0, POLICY)
    assert four.state is BreakerState.CLOSED
    assert breaker.admits(four, T0) is Admission.ALL
    five = breaker.after_failures(four, 1, "HTTP 503", at(1), POLICY)
    assert five.state is BreakerState.OPEN
    assert breaker.opened(four, five)
    assert (five.until, five.failing_since, five.last_error) == (at(31), T0, "HTTP 503")


def test_an_open_breaker_admits_nothing_then_one_probe_at_a_time() -> None:
    opened = breaker.after_failures(HEALTHY, 5, "x", T0, POLICY)
    assert breaker.admits(opened, at(29)) is Admission.NONE
    assert breaker.admits(opened, at(30)) is Admission.PROBE
    probing = breaker.probing(opened, at(30), lease_s=60)
    assert probing.state is BreakerState.HALF_OPEN
    assert breaker.admits(probing, at(60)) is Admission.NONE  # the probe is out
    assert breaker.admits(probing, at(90)) is Admission.PROBE  # its lease was lost


def test_a_failed_probe_reopens_with_the_backoff_doubled_up_to_the_max() -> None:
    health = breaker.after_failures(HEALTHY, 5, "x", T0, POLICY)
    waits = []
    for _ in range(4):
        now = health.until or T0
        health = breaker.after_failures(breaker.probing(health, now, 60), 1, "x", now, POLICY)
        assert health.state is BreakerState.OPEN
        waits.append((health.until - now).total_seconds() if health.until else None)
    assert waits == [60, 100, 100, 100]


def test_a_success_closes_it_and_forgets_the_failures() -> None:
    health = breaker.after_failures(HEALTHY, 7, "x", T0, POLICY)
    closed = breaker.after_success(breaker.probing(health, at(30), 60))
    assert closed == HEALTHY
    assert breaker.recovered(health, closed)
    assert breaker.after_success(HEALTHY) is HEALTHY


def test_failing_long_enough_without_a_success_disables_the_channel() -> None:
    health = breaker.after_failures(HEALTHY, 1, "x", T0, POLICY)
    later = breaker.after_failures(health, 1, "x", at(3599), POLICY)
    assert later.failing_since == T0  # the first failure since the last success
    assert not breaker.should_disable(later, at(3599), POLICY)
    assert breaker.should_disable(later, at(3600), POLICY)
    assert not breaker.should_disable(HEALTHY, at(10**6), POLICY)
