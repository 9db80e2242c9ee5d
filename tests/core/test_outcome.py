"""Channel outcomes and the attempt status each one records."""

from __future__ import annotations

import dataclasses

import pytest

from tidings.core.outcome import (
    Delivered,
    Outcome,
    Partial,
    RateLimited,
    Reason,
    Reject,
    Retry,
    attempt_status,
)
from tidings.core.states import AttemptStatus


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Delivered(), AttemptStatus.DELIVERED),
        (Delivered(provider_response='{"ok":true}'), AttemptStatus.DELIVERED),
        (Retry(Reason.TIMEOUT, "timed out after 15 s"), AttemptStatus.RETRYABLE),
        (Retry(Reason.SERVER_ERROR, "HTTP 503", retry_after_s=30.0), AttemptStatus.RETRYABLE),
        (RateLimited("HTTP 429", retry_after_s=12.0), AttemptStatus.RATE_LIMITED),
        (Reject(Reason.AUTH, "HTTP 401"), AttemptStatus.PERMANENT),
        (Reject(Reason.GONE, "HTTP 410", disable_channel=True), AttemptStatus.PERMANENT),
        (Partial("2 of 3 recipients refused"), AttemptStatus.PARTIAL),
    ],
)
def test_attempt_status(outcome: Outcome, status: AttemptStatus) -> None:
    assert attempt_status(outcome) is status


def test_every_outcome_type_has_a_distinct_status() -> None:
    samples: list[Outcome] = [
        Delivered(),
        Retry(Reason.CONNECTION, "reset"),
        RateLimited("slow down"),
        Reject(Reason.CLIENT_ERROR, "bad"),
        Partial("some"),
    ]
    assert len({attempt_status(o) for o in samples}) == len(samples)


def test_something_else_is_not_an_outcome() -> None:
    with pytest.raises(AssertionError):
        attempt_status(True)  # type: ignore[arg-type]


def test_reason_is_the_closed_set() -> None:
    assert {r.value for r in Reason} == {
        "auth",
        "client_error",
        "server_error",
        "timeout",
        "connection",
        "too_large",
        "invalid_target",
        "gone",
        "redirect",
        "blocked_address",
        "rate_limited",
        "vendor_error",
        "unexpected",
        "interrupted",
    }


def test_defaults_and_immutability() -> None:
    reject = Reject(Reason.INVALID_TARGET, "no such chat")
    assert reject.disable_channel is False
    assert reject.provider_response is None
    assert RateLimited("x").retry_after_s is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        reject.error = "changed"  # type: ignore[misc]
