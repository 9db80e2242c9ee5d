"""Turn send results into the store's fenced transitions and attempt rows (O1–O5, O7, D5).

Results of one claim are written together: all delivered rows in one statement, failures
grouped by what they share, so a busy channel costs a few commits per claim, not per row.
Whether a retryable failure has an attempt left is decided here, by `core.retry.exhausted`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
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
) -> int:
    """Write every result of `claim`, and give back the rows that were not sent (`deferred`).
    Returns how many rows the lease no longer held (fenced writes, C3), after logging them."""
    channel = claim.channel
    attempts_at_claim = {item.delivery.id: item.delivery.attempts for item in claim.items}
    writes = _Writes(store, claim.token, worker_id)
    sent: list[SendResult] = []
    retries: dict[tuple[int, float | None, str], list[SendResult]] = defaultdict(list)
    spent: dict[str, list[SendResult]] = defaultdict(list)
    limited: list[SendResult] = []
    for result in results:
        match result.outcome:
            case Delivered() | Partial():
                sent.append(result)
            case Retry(error=error, retry_after_s=hint):
                tries = max(attempts_at_claim[i] for i in result.ids)
                if retry.exhausted(tries, channel.max_attempts):
                    spent[error].append(result)
                else:
                    retries[(tries, hint, error)].append(result)
            case RateLimited():
                limited.append(result)
            case Reject() as reject:
                await writes.fail(result, reject)
                if reject.disable_channel:
                    await _disable(store, claim, reject)
    if sent:
        await writes.run("mark_sent", sent, store.mark_sent)
    for (tries, hint, error), group in retries.items():
        delay = retry.retry_delay_s(tries, channel.retry_backoff_s, hint, rand)
        await writes.run("schedule_retry", group, store.schedule_retry, delay, error)
    for error, group in spent.items():
        await writes.run("exhaust", group, store.exhaust, error)
    if limited:
        hints = [r.outcome.retry_after_s for r in limited if isinstance(r.outcome, RateLimited)]
        delay = retry.rate_limit_delay_s(max((h for h in hints if h is not None), default=None))
        error = limited[0].outcome.error if isinstance(limited[0].outcome, RateLimited) else ""
        ids, rows = _ids(limited), _rows(limited, worker_id)
        changed = await store.rate_limited(claim.token, channel.id, ids, delay, error, rows)
        writes.count("rate_limited", len(ids), changed)
    if deferred:
        writes.count("defer", len(deferred), await store.defer(claim.token, deferred))
    return writes.fenced


class _Writes:
    """A claim's fenced writes, counting the rows whose lease had passed on (C3)."""

    def __init__(self, store: Store, token: str, worker_id: str) -> None:
        self._store = store
        self._token = token
        self._worker_id = worker_id
        self.fenced = 0

    async def run(
        self,
        transition: str,
        results: Sequence[SendResult],
        write: Callable[..., Awaitable[int]],
        *args: object,
    ) -> None:
        """`write(token, ids, *args, attempt_rows)` for the rows of `results`."""
        ids = _ids(results)
        changed = await write(self._token, ids, *args, _rows(results, self._worker_id))
        self.count(transition, len(ids), changed)

    async def fail(self, result: SendResult, reject: Reject) -> None:
        await self.run("fail", [result], self._store.fail, reject.error)

    def count(self, transition: str, asked: int, changed: int) -> None:
        if changed < asked:
            self.fenced += asked - changed
            log.warning(
                "fenced %d stale write(s) (%s): the lease passed to another worker",
                asked - changed,
                transition,
            )


async def _disable(store: Store, claim: Claim, reject: Reject) -> None:
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
