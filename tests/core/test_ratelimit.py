"""Token-bucket math for the per-channel rate limit (C6, O4, D4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.core.ratelimit import (
    UNLIMITED,
    Bucket,
    available,
    full,
    next_token_at,
    pause,
    refill,
    take,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_new_bucket_is_full() -> None:
    bucket = full(T0, 5)
    assert bucket == Bucket(tokens=5.0, updated_at=T0)
    assert available(bucket, T0, 60.0, 5) == 5


def test_one_per_second_with_burst_one() -> None:
    bucket = full(T0, 1)
    sent_at = []
    for tenth in range(51):  # every 100 ms for 5 s
        now = at(tenth / 10)
        if available(bucket, now, 60.0, 1) >= 1:
            bucket = take(bucket, now, 60.0, 1, 1)
            sent_at.append(tenth / 10)
    assert sent_at == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_refill_never_exceeds_burst() -> None:
    bucket = take(full(T0, 3), T0, 60.0, 3, 3)
    assert available(bucket, at(1.5), 60.0, 3) == 1
    assert available(bucket, at(3600), 60.0, 3) == 3
    assert refill(bucket, at(3600), 60.0, 3).tokens == 3.0


def test_a_lowered_burst_caps_a_bucket_that_held_more() -> None:
    assert available(full(T0, 10), T0, 60.0, 2) == 2


def test_take_more_than_available_is_refused() -> None:
    bucket = full(T0, 2)
    with pytest.raises(ValueError, match="cannot take 3"):
        take(bucket, T0, 60.0, 2, 3)
    with pytest.raises(ValueError, match="negative"):
        take(bucket, T0, 60.0, 2, -1)


def test_unlimited_channel() -> None:
    bucket = full(T0, 1)
    assert available(bucket, T0, 0.0, 1) == UNLIMITED
    after = take(bucket, at(5), 0.0, 1, 500)
    assert after.updated_at == at(5)
    assert available(after, at(5), 0.0, 1) == UNLIMITED
    assert next_token_at(after, at(5), 0.0, 1) == at(5)


def test_pause_drains_and_holds_until_then_refills_from_there() -> None:
    bucket = pause(full(T0, 5), T0, until=at(30))
    assert bucket.tokens == 0.0
    assert bucket.paused_until == at(30)
    assert available(bucket, at(29.999), 60.0, 5) == 0
    assert available(bucket, at(30), 60.0, 5) == 0  # the pause earned nothing
    assert available(bucket, at(31), 60.0, 5) == 1
    assert available(bucket, at(32.5), 60.0, 5) == 2
    assert next_token_at(bucket, at(10), 60.0, 5) == at(31)


def test_pause_also_holds_an_unlimited_channel() -> None:
    bucket = pause(full(T0, 1), T0, until=at(60))
    assert available(bucket, at(59), 0.0, 1) == 0
    assert available(bucket, at(60), 0.0, 1) == UNLIMITED
    assert next_token_at(bucket, at(1), 0.0, 1) == at(60)
    with pytest.raises(ValueError, match="0 available"):
        take(bucket, at(1), 0.0, 1, 1)


def test_a_shorter_second_pause_does_not_shorten_the_first() -> None:
    bucket = pause(full(T0, 1), T0, until=at(60))
    bucket = pause(bucket, at(5), until=at(20))
    assert bucket.paused_until == at(60)
    assert available(bucket, at(59), 60.0, 1) == 0


def test_refill_after_the_pause_clears_it() -> None:
    bucket = refill(pause(full(T0, 1), T0, until=at(10)), at(11), 60.0, 1)
    assert bucket.paused_until is None
    assert bucket.tokens == pytest.approx(1.0)


def test_a_clock_going_backwards_neither_adds_nor_removes_tokens() -> None:
    bucket = Bucket(tokens=0.5, updated_at=at(100))
    back = refill(bucket, at(50), 60.0, 5)
    assert back.tokens == 0.5
    assert back.updated_at == at(100)  # time already counted is not counted twice
    assert available(bucket, at(50), 60.0, 5) == 0
    assert available(bucket, at(100.5), 60.0, 5) == 1


def test_next_token_at() -> None:
    bucket = take(full(T0, 1), T0, 6.0, 1, 1)  # one token per 10 s
    assert next_token_at(bucket, at(0), 6.0, 1) == at(10)
    assert next_token_at(bucket, at(4), 6.0, 1) == at(10)
    assert next_token_at(bucket, at(12), 6.0, 1) == at(12)
    with pytest.raises(ValueError, match="burst 0"):
        next_token_at(Bucket(tokens=0.0, updated_at=T0), T0, 6.0, 0)


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.floats(min_value=0.0, max_value=5.0),
    rate=st.floats(min_value=0.1, max_value=6000.0),
    burst=st.integers(min_value=1, max_value=5),
    paused_for=st.one_of(st.none(), st.floats(min_value=0.0, max_value=120.0)),
    now_offset=st.floats(min_value=-10.0, max_value=200.0),
)
def test_next_token_at_is_exactly_when_a_token_appears(
    tokens: float, rate: float, burst: int, paused_for: float | None, now_offset: float
) -> None:
    paused_until = None if paused_for is None else at(paused_for)
    bucket = Bucket(tokens=tokens, updated_at=T0, paused_until=paused_until)
    now = at(now_offset)
    when = next_token_at(bucket, now, rate, burst)
    assert when >= now
    assert available(bucket, when, rate, burst) >= 1
    if when > now:
        assert available(bucket, when - timedelta(microseconds=2), rate, burst) == 0


steps = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=30.0),  # seconds since the previous step
        st.integers(min_value=0, max_value=10),  # rows the claim would like
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(min_value=0.5, max_value=600.0),
    burst=st.integers(min_value=1, max_value=8),
    plan=steps,
)
def test_no_window_ever_exceeds_burst_plus_rate(
    rate: float, burst: int, plan: list[tuple[float, int]]
) -> None:
    bucket = full(T0, burst)
    elapsed = 0.0
    log: list[tuple[datetime, int]] = []
    for gap, wanted in plan:
        elapsed += gap
        now = at(elapsed)
        granted = min(wanted, available(bucket, now, rate, burst))
        bucket = take(bucket, now, rate, burst, granted)
        assert 0.0 <= bucket.tokens <= burst
        log.append((now, granted))
    for i, (start, _) in enumerate(log):
        for j in range(i, len(log)):
            end = log[j][0]
            taken = sum(n for _, n in log[i : j + 1])
            allowance = burst + rate * (end - start).total_seconds() / 60.0
            assert taken <= allowance + 1e-6


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(min_value=0.5, max_value=600.0),
    burst=st.integers(min_value=1, max_value=8),
    offsets=st.lists(st.floats(min_value=-100.0, max_value=100.0), min_size=1, max_size=30),
)
def test_tokens_stay_within_zero_and_burst_whatever_the_clock_does(
    rate: float, burst: int, offsets: list[float]
) -> None:
    bucket = full(T0, burst)
    for offset in offsets:
        now = at(offset)
        bucket = take(bucket, now, rate, burst, available(bucket, now, rate, burst) // 2)
        assert 0.0 <= bucket.tokens <= burst
        assert 0 <= available(bucket, now, rate, burst) <= burst
