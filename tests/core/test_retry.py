"""Retry timing (O2), provider hints and Retry-After (O4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.core.retry import (
    DEFAULT_RATE_LIMIT_DELAY_S,
    MAX_BACKOFF_S,
    MAX_RETRY_HINT_S,
    backoff_s,
    exhausted,
    parse_retry_after,
    rate_limit_delay_s,
    retry_delay_s,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def middle() -> float:
    return 0.5  # jitter factor 0.8 + 0.4 * 0.5 == 1.0


def lowest() -> float:
    return 0.0


def highest() -> float:
    return 0.999999


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [(1, 30.0), (2, 120.0), (3, 480.0), (4, 1920.0), (5, 3600.0), (6, 3600.0)],
)
def test_backoff_grows_four_times_per_attempt_and_caps_at_an_hour(
    attempts: int, expected: float
) -> None:
    assert backoff_s(attempts, 30.0, middle) == pytest.approx(expected)


def test_attempts_below_one_count_as_one() -> None:
    assert backoff_s(0, 30.0, middle) == pytest.approx(30.0)
    assert backoff_s(-5, 30.0, middle) == pytest.approx(30.0)


def test_jitter_extremes() -> None:
    assert backoff_s(1, 100.0, lowest) == pytest.approx(80.0)
    assert backoff_s(1, 100.0, highest) == pytest.approx(120.0, abs=1e-3)


def test_huge_attempt_counts_do_not_overflow() -> None:
    assert backoff_s(10_000, 30.0, middle) == MAX_BACKOFF_S
    assert backoff_s(10**12, 1e300, middle) == MAX_BACKOFF_S


def test_zero_base_retries_at_once() -> None:
    assert backoff_s(3, 0.0, middle) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    attempts=st.integers(min_value=1, max_value=50),
    base=st.floats(min_value=0.0, max_value=10_000.0),
    r=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_jitter_stays_within_twenty_percent(attempts: int, base: float, r: float) -> None:
    delay = backoff_s(attempts, base, lambda: r)
    plain = base * 4.0 ** min(attempts - 1, 40)
    assert 0.0 <= delay <= MAX_BACKOFF_S
    assert delay >= min(plain * 0.8, MAX_BACKOFF_S) * (1 - 1e-12)
    assert delay <= plain * 1.2 * (1 + 1e-12)


def test_a_larger_hint_wins() -> None:
    assert retry_delay_s(1, 30.0, 300.0, middle) == pytest.approx(300.0)


def test_a_smaller_hint_loses_to_the_backoff() -> None:
    assert retry_delay_s(3, 30.0, 5.0, middle) == pytest.approx(480.0)


def test_no_hint_is_the_backoff() -> None:
    assert retry_delay_s(2, 30.0, None, middle) == pytest.approx(120.0)


def test_hints_are_clamped() -> None:
    assert retry_delay_s(1, 30.0, 86_400.0, middle) == MAX_RETRY_HINT_S
    assert retry_delay_s(1, 30.0, float("nan"), middle) == pytest.approx(30.0)
    assert rate_limit_delay_s(86_400.0) == MAX_RETRY_HINT_S
    assert rate_limit_delay_s(-3.0) == 0.0
    assert rate_limit_delay_s(7.5) == 7.5


def test_rate_limit_without_hint_waits_a_minute() -> None:
    assert rate_limit_delay_s(None) == DEFAULT_RATE_LIMIT_DELAY_S == 60.0
    assert rate_limit_delay_s(float("nan")) == DEFAULT_RATE_LIMIT_DELAY_S


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "expected"),
    [(0, 3, False), (2, 3, False), (3, 3, True), (4, 3, True), (1, 1, True)],
)
def test_exhausted(attempts: int, max_attempts: int, expected: bool) -> None:
    assert exhausted(attempts, max_attempts) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("-5", 0.0),
        ("999999999999999999999", MAX_RETRY_HINT_S),
        ("Wed, 01 May 2024 12:00:30 GMT", 30.0),
        ("Wed, 01 May 2024 11:00:00 GMT", 0.0),  # in the past
        ("Thu, 02 May 2024 12:00:00 GMT", MAX_RETRY_HINT_S),
        (None, None),
        ("", None),
        ("soon", None),
        ("1e3", None),
        ("nan", None),
        ("12 seconds", None),
        ("Wed, 99 Foo 2024 12:00:30 GMT", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_retry_after_date_compares_with_an_aware_now_in_any_zone() -> None:
    beijing = timezone(timedelta(hours=8))
    now = NOW.astimezone(beijing)
    assert parse_retry_after("Wed, 01 May 2024 12:01:00 GMT", now) == 60.0


def test_retry_after_date_with_naive_now_reads_now_as_utc() -> None:
    assert parse_retry_after("Wed, 01 May 2024 12:00:10 GMT", NOW.replace(tzinfo=None)) == 10.0
