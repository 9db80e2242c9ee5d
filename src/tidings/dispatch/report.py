"""Turn send results into the store's fenced transitions and attempt rows (O1–O5, O7, D5).

Results of one claim are written together: all delivered rows in one statement, failures
grouped by what they share, so a busy channel costs a few commits per claim, not per row.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from tidings.core import retry
from tidings.core.model import AttemptRecord, Claim
from tidings.core.outcome import (
    Delivered,
    Outcome,
    Partial,
    RateLimited,
    Reject,
    Retry,
    attempt_status,
)
from tidings.core.states import Failure
from tidings.store import Store

log = logging.getLogger("tidings.dispatch")


@dataclass(frozen=True, slots=True)
class SendResult:
    """One message's outcome; a digest message covers several deliveries."""

    ids: tuple[int, ...]
    outcome: Outcome
    started_at: datetime
    finished_at: datetime
    batch_id: int | None = None


def attempt_rows(result: SendResult, worker_id: str) -> list[AttemptRecord]:
    outcome = result.outcome
    error = None if isinstance(outcome, Delivered) else outcome.error
    return [
        AttemptRecord(
            delivery_id=delivery_id,
            worker_id=worker_id,
            status=attempt_status(outcome),
            started_at=result.started_at,
            finished_at=result.finished_at,
            error=error,
            provider_response=outcome.provider_response,
            batch_id=result.batch_id,
        )
        for delivery_id in result.ids
    ]


async def record(
    store: Store,
    claim: Claim,
    results: Sequence[SendResult],
    *,
    worker_id: str,
    rand: Callable[[], float],
    deferred: Sequence[int] = (),
) -> None:
    """Write every result of `claim`, and give back the rows that were not sent (`deferred`)."""
    channel = claim.channel
    attempts_at_claim = {item.delivery.id: item.delivery.attempts for item in claim.items}
    sent: list[SendResult] = []
    retries: dict[tuple[int, float | None, str], list[SendResult]] = defaultdict(list)
    limited: list[SendResult] = []
    for result in results:
        match result.outcome:
            case Delivered() | Partial():
                sent.append(result)
            case Retry(error=error, retry_after_s=hint):
                tries = max(attempts_at_claim[i] for i in result.ids)
                retries[(tries, hint, error)].append(result)
            case RateLimited():
                limited.append(result)
            case Reject() as reject:
                await _reject(store, claim, result, reject, worker_id)
    if sent:
        await store.mark_sent(claim.token, _ids(sent), _rows(sent, worker_id))
    for (tries, hint, error), group in retries.items():
        delay = retry.retry_delay_s(tries, channel.retry_backoff_s, hint, rand)
        await store.schedule_retry(claim.token, _ids(group), delay, error, _rows(group, worker_id))
    if limited:
        hints = [r.outcome.retry_after_s for r in limited if isinstance(r.outcome, RateLimited)]
        delay = retry.rate_limit_delay_s(max((h for h in hints if h is not None), default=None))
        error = limited[0].outcome.error if isinstance(limited[0].outcome, RateLimited) else ""
        await store.rate_limited(
            claim.token, channel.id, _ids(limited), delay, error, _rows(limited, worker_id)
        )
    if deferred:
        await store.defer(claim.token, deferred)


async def _reject(
    store: Store, claim: Claim, result: SendResult, reject: Reject, worker_id: str
) -> None:
    await store.fail(
        claim.token,
        result.ids,
        Failure.PERMANENT,
        reject.error,
        attempt_rows(result, worker_id),
    )
    if reject.disable_channel:
        reason = f"disabled after a permanent answer: {reject.error}"
        skipped = await store.disable_channel(claim.channel.id, reason[:500])
        log.warning(
            "channel %r disabled (%s); %d pending deliveries skipped",
            claim.channel.name,
            reject.error,
            skipped,
        )


def _ids(results: Sequence[SendResult]) -> list[int]:
    return [i for r in results for i in r.ids]


def _rows(results: Sequence[SendResult], worker_id: str) -> list[AttemptRecord]:
    return [row for r in results for row in attempt_rows(r, worker_id)]
