"""Remote workers (W4): lease rendered messages over HTTP, send them elsewhere, report back.

The server claims and renders exactly as its own dispatcher would, so a worker needs no
templates and no database credentials. Reports are fenced by the lease token like every
other write: a worker whose lease passed to another changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from tidings.channels.base import Message, Target
from tidings.channels.registry import Registry
from tidings.core.clock import SYSTEM_CLOCK, Clock
from tidings.core.model import Channel, Claim
from tidings.core.states import Mode
from tidings.dispatch import report, sending
from tidings.dispatch.report import SendResult
from tidings.store import Store

log = logging.getLogger("tidings.dispatch.leasing")
#: Kinds that only make sense next to the database (the inbox writes rows).
LOCAL_ONLY = frozenset({"inbox"})


@dataclass(frozen=True)
class Lease:
    token: str
    channel: Channel
    messages: list[Message]


@dataclass(frozen=True)
class Capabilities:
    """What a worker can send: channel kinds, and tenants (None: every tenant)."""

    kinds: Collection[str] | None = None
    tenants: Collection[str] | None = None

    def accepts(self, channel: Channel) -> bool:
        if channel.kind in LOCAL_ONLY:
            return False
        if self.kinds is not None and channel.kind not in self.kinds:
            return False
        return self.tenants is None or channel.tenant in self.tenants


async def lease_work(
    store: Store,
    registry: Registry,
    *,
    worker_id: str,
    capabilities: Capabilities,
    max_messages: int,
    lease_s: float,
    rand: Callable[[], float],
    clock: Clock = SYSTEM_CLOCK,
) -> list[Lease]:
    leases: list[Lease] = []
    budget = max_messages
    for channel in await store.due_channels():
        if budget <= 0:
            break
        if not capabilities.accepts(channel) or channel.kind not in registry:
            continue
        if channel.mode is Mode.REALTIME:
            lease = await _lease_realtime(
                store, registry, channel, budget, lease_s, worker_id, rand, clock
            )
        else:
            lease = await _lease_digest(store, registry, channel, lease_s, worker_id, rand, clock)
        if lease is not None and lease.messages:
            leases.append(lease)
            budget -= len(lease.messages)
    return leases


async def _lease_realtime(
    store: Store,
    registry: Registry,
    channel: Channel,
    limit: int,
    lease_s: float,
    worker_id: str,
    rand: Callable[[], float],
    clock: Clock,
) -> Lease | None:
    claim = await store.claim_realtime(channel.id, limit, lease_s, worker_id)
    if claim is None:
        return None
    adapter = registry.get(claim.channel.kind)
    messages: list[Message] = []
    failed: list[SendResult] = []
    for item in claim.items:
        target = Target((item.delivery.id,), message_id=item.delivery.message_id)
        try:
            messages.append(sending.render_single(adapter, claim.channel, target, item.event))
        except Exception as error:
            failed.append(sending.render_failed(target.delivery_ids, None, error, clock.now))
    if failed:
        await report.record(store, claim, failed, adapter=adapter, worker_id=worker_id, rand=rand)
    return Lease(claim.token, claim.channel, messages)


async def _lease_digest(
    store: Store,
    registry: Registry,
    channel: Channel,
    lease_s: float,
    worker_id: str,
    rand: Callable[[], float],
    clock: Clock,
) -> Lease | None:
    if not await store.digest_due(channel.id):
        return None
    claim = await store.claim_digest(channel.id, lease_s, worker_id)
    if claim is None:
        return None
    adapter = registry.get(claim.channel.kind)
    batch_id = claim.items[0].delivery.batch_id or min(claim.ids)
    events = [item.event for item in claim.items]
    try:
        planned = sending.plan_digest(adapter, claim.channel, batch_id, claim.entries, events)
    except Exception as error:
        failed = sending.render_failed(claim.ids, batch_id, error, clock.now)
        await report.record(store, claim, [failed], adapter=adapter, worker_id=worker_id, rand=rand)
        return None
    messages = planned[:1]
    for message in planned[1:]:  # D4: one token per message; the rest wait for the next lease
        if not await store.take_token(claim.channel.id):
            break
        messages.append(message)
    kept = {i for m in messages for i in m.target.delivery_ids}
    rest = [i for i in claim.ids if i not in kept]
    if rest:
        await store.defer(claim.token, rest)
    return Lease(claim.token, claim.channel, messages)


async def apply_report(
    store: Store,
    registry: Registry,
    *,
    token: str,
    worker_id: str,
    results: Sequence[SendResult],
    rand: Callable[[], float],
    capabilities: Capabilities | None = None,
) -> tuple[int, int]:
    """Record a worker's results, scrubbed of the channel's secrets here (a worker's text is
    not trusted to be); rows it leased but did not report are given back. A lease of a
    channel outside `capabilities` (another worker's) is not this worker's to report.
    Returns (rows recorded, rows fenced)."""
    reported = [i for result in results for i in result.ids]
    claim: Claim | None = await store.leased(token)
    if claim is not None and capabilities is not None and not capabilities.accepts(claim.channel):
        claim = None
    if claim is None:
        log.warning(
            "fenced a report of %d row(s) from %s: its lease passed on", len(reported), worker_id
        )
        return 0, len(reported)
    held = set(claim.ids)
    batch_of = {item.delivery.id: item.delivery.batch_id for item in claim.items}
    current = [replace(r, batch_id=batch_of.get(r.ids[0])) for r in results if set(r.ids) <= held]
    stale = len(reported) - sum(len(r.ids) for r in current)
    unreported = [i for i in claim.ids if i not in set(reported)]
    fenced = await report.record(
        store,
        claim,
        current,
        adapter=registry.get(claim.channel.kind),
        worker_id=worker_id,
        rand=rand,
        deferred=unreported,
    )
    return sum(len(r.ids) for r in current) - fenced, stale + fenced
