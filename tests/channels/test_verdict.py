"""The one rule → outcome function every vendor table goes through, and the catch-all for an
exception nobody expected: scrubbed of secrets, its traceback logged once, never stored."""

from __future__ import annotations

import logging

import pytest

from tidings.channels.failure import scrub_secrets, unexpected_failure
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
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
from tidings.core.redact import MASK, ordered, secret_strings
from tidings.core.states import AttemptStatus

SECRET = "CANARY-SECRET-7f3a9c"


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (StatusRule(Verdict.DELIVERED, Reason.UNEXPECTED), Delivered("body")),
        (
            StatusRule(Verdict.RETRY, Reason.SERVER_ERROR),
            Retry(Reason.SERVER_ERROR, "HTTP 503", 7.0, "body"),
        ),
        (
            StatusRule(Verdict.RATE_LIMITED, Reason.RATE_LIMITED),
            RateLimited("HTTP 503", 7.0, "body"),
        ),
        (StatusRule(Verdict.REJECT, Reason.AUTH), Reject(Reason.AUTH, "HTTP 503", "body")),
        (
            StatusRule(Verdict.REJECT, Reason.GONE, disable_channel=True),
            Reject(Reason.GONE, "HTTP 503", "body", disable_channel=True),
        ),
    ],
    ids=lambda v: v.verdict.value if isinstance(v, StatusRule) else "",
)
def test_outcome_for_each_verdict(rule: StatusRule, expected: Outcome) -> None:
    got = outcome_for(rule, "HTTP 503", provider_response="body", retry_after_s=7.0)
    assert got == expected


def test_the_verdicts_are_the_closed_set_the_attempt_statuses_need() -> None:
    statuses = {attempt_status(outcome_for(StatusRule(v, Reason.UNEXPECTED), "e")) for v in Verdict}
    assert statuses == {
        AttemptStatus.DELIVERED,
        AttemptStatus.RETRYABLE,
        AttemptStatus.RATE_LIMITED,
        AttemptStatus.PERMANENT,
    }


def test_scrub_secrets_masks_every_text_of_an_outcome() -> None:
    url = f"https://hooks.example/services/T1/B1/{SECRET}"
    secrets = ordered(secret_strings(url))
    outcome = Partial(f"refused {url}", provider_response=f"token {SECRET}")
    scrubbed = scrub_secrets(outcome, secrets)
    assert isinstance(scrubbed, Partial)
    assert SECRET not in f"{scrubbed.error} {scrubbed.provider_response}"
    assert scrubbed.error == f"refused {MASK}{url[-4:]}"
    assert scrub_secrets(Delivered("ok"), secrets) == Delivered("ok")


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as caught:
        return caught


def test_an_unexpected_exception_is_a_retry_and_its_traceback_goes_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = raised(RuntimeError(f"boom {SECRET} at https://u:pw@h/x?token={SECRET}"))
    with caplog.at_level(logging.WARNING, logger="tidings.channels"):
        outcome = unexpected_failure(error, channel="ops\nhook", secrets=[SECRET])
    assert outcome == Retry(Reason.UNEXPECTED, f"RuntimeError: boom {MASK}3a9c at https://h/x?…")
    (record,) = caplog.records
    assert (record.name, record.levelno) == ("tidings.channels", logging.WARNING)
    logged = record.getMessage()
    assert logged.startswith("channel 'ops\\nhook': unexpected error while sending\nTraceback")
    assert "in raised" in logged
    assert SECRET not in logged
    assert "u:pw@" not in logged


def test_a_long_message_is_cut() -> None:
    outcome = unexpected_failure(raised(ValueError("x" * 5000)), channel="c", secrets=[])
    assert len(outcome.error) == 1000
    assert outcome.error.endswith("…")
