"""Login throttling (S5): free failures, then a growing wait, per client address."""

from __future__ import annotations

from tidings.core.throttle import (
    FORGET_AFTER_S,
    FREE_FAILURES,
    MAX_WAIT_S,
    LoginThrottle,
    client_key,
    wait_after,
)


def test_the_wait_grows_after_the_free_failures_up_to_a_cap() -> None:
    waits = [wait_after(n) for n in range(1, FREE_FAILURES + 6)]
    assert waits[:FREE_FAILURES] == [0.0] * FREE_FAILURES
    assert waits[FREE_FAILURES:] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert wait_after(10_000) == MAX_WAIT_S


def test_an_address_waits_and_others_do_not() -> None:
    throttle = LoginThrottle()
    now = 1000.0
    for _ in range(FREE_FAILURES):
        assert throttle.retry_after("a", now) == 0
        throttle.failed("a", now)
    assert throttle.retry_after("a", now) == 0  # the free ones cost nothing
    throttle.failed("a", now)
    assert throttle.retry_after("a", now) == 1.0
    assert throttle.retry_after("b", now) == 0
    throttle.failed("a", now + 1)
    assert throttle.retry_after("a", now + 1) == 2.0
    throttle.succeeded("a")
    assert throttle.retry_after("a", now + 1) == 0


def test_a_quiet_address_starts_afresh_and_memory_is_bounded() -> None:
    throttle = LoginThrottle(max_addresses=3)
    for _ in range(FREE_FAILURES + 3):
        throttle.failed("a", 0.0)
    assert throttle.retry_after("a", 1.0) > 0
    assert throttle.retry_after("a", FORGET_AFTER_S + 1) == 0
    for key in ("b", "c", "d", "e"):
        throttle.failed(key, 0.0)
    assert len(throttle._strikes) == 3


def test_client_keys() -> None:
    assert client_key("203.0.113.9") == "203.0.113.9"
    assert client_key("::ffff:203.0.113.9") == "203.0.113.9"
    assert client_key("2001:db8:1:2:3:4:5:6") == client_key("2001:db8:1:2:ffff::1")
    assert client_key("2001:db8:1:2::1") != client_key("2001:db8:1:3::1")
    assert client_key(None) == "unknown"
