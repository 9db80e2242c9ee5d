"""What a channel's job shares: its context, when a send may still start within the lease,
and recording a claim's results (`tidings.dispatch.realtime` and `.digest` are the jobs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from tidings.channels.base import Adapter, SendContext
from tidings.channels.registry import Registry
from tidings.core.breaker import Policy
from tidings.core.clock import Clock
from tidings.core.errors import StoreError
from tidings.core.model import Channel, Claim
from tidings.core.outcome import attempt_status
from tidings.dispatch import report, sending
from tidings.dispatch.gate import ClaimGate
from tidings.dispatch.memory import EventMemory
from tidings.dispatch.report import SendResult
from tidings.dispatch.slots import SendSlots
from tidings.metrics import Metrics
from tidings.store import Store

log = logging.getLogger("tidings.dispatch")

#: Claims of one channel in flight at once (sending, or recording what they sent), so the
#: next claim is taken while earlier ones still send or record (with two, a small claim's
#: sends ran dry while the one before it recorded).
CLAIMS_IN_FLIGHT = 4
#: How many full claims' rows a dispatcher may hold leased before they go to a send: the
#: claim gate's bound (`ClaimGate.ahead`), across all its channels.
CLAIMS_AHEAD = 2
#: How often a dispatcher sweeps a channel's lost leases and expired rows while claiming
#: (rows the sweep would end are never leased meanwhile; they wait at most this long).
SWEEP_EVERY_S = 5.0
#: Time kept, after a send's timeout, for the claim to record its outcome within the lease.
RECORD_MARGIN_S = 1.0
#: Waits between tries to record a claim's outcomes while the database is away.
RECORD_RETRY_FIRST_S = 0.1
RECORD_RETRY_MAX_S = 2.0


@dataclass
class JobContext:
    store: Store
    registry: Registry
    #: A send's context (`traceparent`: the send span's, when tracing is on; `at`: the
    #: attempt's time, when the caller already read the clock; now when not given).
    send_context: Callable[..., SendContext]
    #: Send slots across all channels, handed out in turns by channel.
    slots: SendSlots
    worker_id: str
    lease_s: float
    claim_size: int
    rand: Callable[[], float]
    #: H1: the breaker's thresholds.
    breaker: Policy
    clock: Clock
    events: EventMemory
    stopping: asyncio.Event
    #: Sends one realtime claim runs side by side: the dispatcher's concurrency (more lanes
    #: than slots would only wait).
    lanes: int
    #: Keeps this dispatcher's realtime claims from running far ahead of its sends.
    gate: ClaimGate
    metrics: Metrics | None = None
    #: channel id -> monotonic time of its last sweep by this dispatcher (shared by its jobs,
    #: so a trickle of single events does not sweep on every claim either).
    swept_at: dict[int, float] = field(default_factory=dict)


def sweep_due(ctx: JobContext, channel: Channel, now: float) -> bool:
    last = ctx.swept_at.get(channel.id)
    return last is None or now - last >= SWEEP_EVERY_S


def last_start(adapter: Adapter, channel: Channel, lease_ends: float) -> float:
    """The latest moment (monotonic) a send of this claim may start and still end, and be
    recorded, within the lease: after it, another worker may lease the row and send it too.
    (A send that takes its whole timeout must still leave time to write its outcome.)"""
    longest_send = channel.timeout_s + RECORD_MARGIN_S
    if not adapter.bounded_by_http_timeout:
        longest_send += sending.TIMEOUT_GRACE_S
    return lease_ends - longest_send


async def write(
    ctx: JobContext,
    claim: Claim,
    results: list[SendResult],
    lease_ends: float,
    healthy: bool = False,
) -> None:
    """Record the claim's results and give back its unsent rows. A database that is briefly
    away (a restart) is waited for, within the lease: the outcomes are known, and a claim left
    unrecorded would stall its rows for a whole lease and then send them again. `healthy`:
    the claim saw the channel's breaker closed (an express claim)."""
    if ctx.metrics:
        for result in results:
            seconds = (result.finished_at - result.started_at).total_seconds()
            status = attempt_status(result.outcome).value
            ctx.metrics.sent(claim.channel.kind, status, seconds)
    results.sort(key=lambda result: result.ids[0])  # attempt rows in delivery order
    covered = {i for result in results for i in result.ids}
    unsent = [i for i in claim.ids if i not in covered]
    writes = report.plan(
        ctx.store,
        claim,
        results,
        adapter=ctx.registry.get(claim.channel.kind),
        worker_id=ctx.worker_id,
        rand=ctx.rand,
        deferred=unsent,
        breaker=ctx.breaker,
        healthy=healthy,
    )
    fenced = 0
    for write in writes:
        fenced += await _until_recorded(ctx, claim, write, lease_ends)
    if fenced and ctx.metrics:
        ctx.metrics.fenced(fenced)


async def _until_recorded(
    ctx: JobContext, claim: Claim, write: report.Write, lease_ends: float
) -> int:
    """Run one write, trying again while the database is unreachable and the lease lasts."""
    delay = RECORD_RETRY_FIRST_S
    while True:
        try:
            return await report.fenced(write)
        except StoreError as error:
            if ctx.clock.monotonic() + delay > lease_ends - RECORD_MARGIN_S:
                raise
            log.warning(
                "channel %r: cannot record %s of %d row(s) yet, trying again in %.1f s: %.200s",
                claim.channel.name,
                write.transition,
                write.asked,
                delay,
                error,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECORD_RETRY_MAX_S)
