"""What a vendor's answer means, as data, and the one function that turns it into an outcome.

Every kind keeps its vendor table (HTTP statuses, errcodes, SMTP replies, Bot API codes) as
`StatusRule`s: a closed `Verdict` plus a reason. `outcome_for` is the only place a rule becomes
an `Outcome`, so no adapter repeats the branch. Imports only tidings.core.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple, assert_never

from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry


class Verdict(StrEnum):
    """The four things an answer can mean for the message."""

    DELIVERED = "delivered"  # accepted
    RETRY = "retry"  # try again after the backoff (or the vendor's hint)
    RATE_LIMITED = "rate_limited"  # the vendor throttles the channel: not the message's fault
    REJECT = "reject"  # retrying cannot help


class StatusRule(NamedTuple):
    """How one vendor answer (a status, an errcode, a reply code) is classified."""

    verdict: Verdict
    reason: Reason
    #: The target is gone for good (HTTP 410, a deleted robot): the channel is disabled too.
    disable_channel: bool = False


def outcome_for(
    rule: StatusRule,
    error: str,
    *,
    provider_response: str | None = None,
    retry_after_s: float | None = None,
) -> Outcome:
    """The outcome `rule` gives an answer; `error` is the receiver's own words (ignored when
    delivered) and `retry_after_s` the vendor's hint (ignored when rejected)."""
    match rule.verdict:
        case Verdict.DELIVERED:
            return Delivered(provider_response=provider_response)
        case Verdict.RETRY:
            return Retry(rule.reason, error, retry_after_s, provider_response)
        case Verdict.RATE_LIMITED:
            return RateLimited(error, retry_after_s, provider_response)
        case Verdict.REJECT:
            return Reject(rule.reason, error, provider_response, rule.disable_channel)
        case _:
            assert_never(rule.verdict)


__all__ = ["StatusRule", "Verdict", "outcome_for"]
