"""A run of the same job failure is said once, then once a minute with a count; a new
failure at once; the end of the run once."""

from __future__ import annotations

from tidings.dispatch.repeats import RepeatedFailures


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_same_failure_is_said_once_a_period_with_what_was_held_back() -> None:
    clock = Clock()
    failures = RepeatedFailures(60.0, clock)
    assert failures.failed(1, "disk is full") == 0  # the first: at once
    said = []
    for _ in range(59):  # a poll a second
        clock.t += 1
        said.append(failures.failed(1, "disk is full"))
    assert said == [None] * 59
    clock.t += 1
    assert failures.failed(1, "disk is full") == 59  # a minute on: again, with the count
    clock.t += 1
    assert failures.failed(1, "disk is full") is None


def test_a_different_failure_or_channel_is_said_at_once() -> None:
    clock = Clock()
    failures = RepeatedFailures(60.0, clock)
    assert failures.failed(1, "disk is full") == 0
    assert failures.failed(2, "disk is full") == 0  # another channel
    assert failures.failed(1, "connection refused") == 0  # another cause
    assert failures.failed(1, "connection refused") is None


def test_success_ends_the_run_and_tells_how_long_it_was() -> None:
    clock = Clock()
    failures = RepeatedFailures(60.0, clock)
    assert failures.succeeded(1) == 0  # never failed: nothing to say
    failures.failed(1, "disk is full")
    failures.failed(1, "disk is full")
    failures.failed(1, "connection refused")
    assert failures.succeeded(1) == 3
    assert failures.succeeded(1) == 0
    assert failures.failed(1, "disk is full") == 0  # a new run is said at once
