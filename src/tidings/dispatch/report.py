"""Turn send results into the store's fenced transitions and attempt rows (O1–O5, O7, D5).

Results of one claim are written together: all delivered rows in one statement, failures
grouped by what they share, so a busy channel costs a few commits per claim, not per row.
Whether a retryable failure has an attempt left is decided here, by `core.retry.exhausted`.
Every text is scrubbed of the channel's secrets here, whoever sent (this dispatcher, a remote
worker, whose report is not trusted to have done it) before it is stored or logged (S2).
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeGuard

from tidings.channels.base import Adapter
from tidings.core import retry
from tidings.core.breaker import Policy
from tidings.core.model import AttemptRecord, Channel, Claim
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


@dataclass(frozen=True, slots=True)
class Write:
    """One fenced transition of some of a claim's rows: a transaction of its own, so a list
    of them can be retried from the first one that did not happen."""

    transition: str
    #: Rows the write asks for (those still leased change; the rest are fenced).
    asked: int
    run: Callable[[], Awaitable[int]]


def scrubbed(adapter: Adapter, claim: Claim, results: Sequence[SendResult]) -> list[SendResult]:
    """`results` with the channel's secrets masked in every error and provider response."""
    clean = []
    for result in results:
        outcome = adapter.scrubbed(result.outcome, claim.channel)
        clean.append(result if outcome is result.outcome else replace(result, outcome=outcome))
    return clean


def plan(
    store: Store,
    claim: Claim,
    results: Sequence[SendResult],
    *,
    adapter: Adapter,
    worker_id: str,
    rand: Callable[[], float],
    deferred: Sequence[int] = (),
    breaker: Policy | None = None,
    healthy: bool = False,
) -> list[Write]:
    """The writes that record every result of `claim` (scrubbed) and give back the rows not
    sent, and then what they say about the channel's health (H1). `healthy`: the claim saw
    the breaker closed, so deliveries alone have nothing to tell it."""
    channel, token = claim.channel, claim.token
    results = scrubbed(adapter, claim, results)
    attempts_at_claim = {item.delivery.id: item.delivery.attempts for item in claim.items}
    sent: list[SendResult] = []
    retries: dict[tuple[int, float | None, str], list[SendResult]] = defaultdict(list)
    spent: dict[str, list[SendResult]] = defaultdict(list)
    limited: list[SendResult] = []
    writes: list[Write] = []
    for result in results:
        match result.outcome:
            case Delivered() | Partial():
                sent.append(result)
            case Retry(error=error, retry_after_s=hint):
                # Each delivery's own attempts decide: a digest's entry that joined the batch
                # late is not exhausted with the entries that have spent theirs.
                left = [i for i in result.ids if not _spent(attempts_at_claim[i], channel)]
                if len(left) < len(result.ids):
                    done = tuple(i for i in result.ids if i not in left)
                    spent[error].append(replace(result, ids=done))
                if left:
                    tries = max(attempts_at_claim[i] for i in left)
                    retries[(tries, hint, error)].append(replace(result, ids=tuple(left)))
            case RateLimited():
                limited.append(result)
            case Reject() as reject:
                rows = _rows([result], worker_id)
                writes.append(_write("fail", result.ids, store.fail, token, reject.error, rows))
                if reject.disable_channel:
                    disable = functools.partial(_disable, store, claim, reject)
                    writes.append(Write("disable", 0, disable))
    if sent:
        rows = _rows(sent, worker_id)
        writes.append(_write("mark_sent", _ids(sent), store.mark_sent, token, rows))
    for (tries, hint, error), group in retries.items():
        delay = retry.retry_delay_s(tries, channel.retry_backoff_s, hint, rand)
        rows = _rows(group, worker_id)
        writes.append(
            _write("schedule_retry", _ids(group), store.schedule_retry, token, delay, error, rows)
        )
    for error, group in spent.items():
        rows = _rows(group, worker_id)
        writes.append(_write("exhaust", _ids(group), store.exhaust, token, error, rows))
    if limited:
        hints = [r.outcome.retry_after_s for r in limited if isinstance(r.outcome, RateLimited)]
        delay = retry.rate_limit_delay_s(max((h for h in hints if h is not None), default=None))
        error = limited[0].outcome.error if isinstance(limited[0].outcome, RateLimited) else ""
        ids, rows = _ids(limited), _rows(limited, worker_id)
        call = functools.partial(store.rate_limited, token, channel.id, ids, delay, error, rows)
        writes.append(Write("rate_limited", len(ids), call))
    if deferred:
        writes.append(_write("defer", deferred, store.defer, token))
    health = _health(store, channel.id, results, breaker or Policy())
    if healthy and not any(_failure(r.outcome) for r in results):
        health = None
    if health is not None:
        writes.append(health)
    return writes


def _health(
    store: Store, channel_id: int, results: Sequence[SendResult], policy: Policy
) -> Write | None:
    """Deliveries close the breaker; retryable failures count toward opening it. Permanent
    failures and provider rate limits keep their own rules."""
    delivered = any(isinstance(r.outcome, Delivered | Partial) for r in results)
    failed = [r.outcome for r in results if _failure(r.outcome)]
    if not delivered and not failed:
        return None
    error = failed[-1].error if failed else ""
    call = functools.partial(store.record_health, channel_id, delivered, len(failed), error, policy)
    return Write("health", 0, _ignoring_change(call))


def _failure(outcome: Outcome) -> TypeGuard[Retry]:
    """A retryable failure the receiver is answerable for: a send cut short by this
    worker's own shutdown says nothing about the channel's health."""
    return isinstance(outcome, Retry) and outcome.reason is not Reason.INTERRUPTED


def _ignoring_change(call: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        await call()
        return 0

    return run


async def record(
    store: Store,
    claim: Claim,
    results: Sequence[SendResult],
    *,
    adapter: Adapter,
    worker_id: str,
    rand: Callable[[], float],
    deferred: Sequence[int] = (),
    breaker: Policy | None = None,
) -> int:
    """Write every result of `claim`, and give back the rows that were not sent (`deferred`).
    Returns how many rows the lease no longer held (fenced writes, C3), after logging them."""
    writes = plan(
        store,
        claim,
        results,
        adapter=adapter,
        worker_id=worker_id,
        rand=rand,
        deferred=deferred,
        breaker=breaker,
    )
    return sum([await fenced(write) for write in writes])


async def fenced(write: Write) -> int:
    """Run `write`; how many of its rows were fenced (logged when any)."""
    changed = await write.run()
    if write.asked <= changed:
        return 0
    log.warning(
        "fenced %d stale write(s) (%s): the lease passed to another worker",
        write.asked - changed,
        write.transition,
    )
    return write.asked - changed


def _write(
    transition: str,
    ids: Sequence[int],
    call: Callable[..., Awaitable[int]],
    token: str,
    *args: object,
) -> Write:
    """A fenced store transition: `call(token, ids, *args)`."""
    rows = list(ids)
    return Write(transition, len(rows), functools.partial(call, token, rows, *args))


async def _disable(store: Store, claim: Claim, reject: Reject) -> int:
    reason = f"disabled after a permanent answer: {reject.error}"
    skipped = await store.disable_channel(claim.channel.id, reason[:500])
    log.warning(
        "channel %r disabled (%s); %d pending deliveries skipped",
        claim.channel.name,
        reject.error,
        skipped,
    )
    return 0


def _spent(attempts: int, channel: Channel) -> bool:
    return retry.exhausted(attempts, channel.max_attempts)


def _ids(results: Sequence[SendResult]) -> list[int]:
    return [i for r in results for i in r.ids]


def _rows(results: Sequence[SendResult], worker_id: str) -> list[AttemptRecord]:
    return [row for r in results for row in attempt_rows(r, worker_id)]
