"""A database that fails while a claim records its outcomes: the outcomes are known, so they
are recorded once it is back (within the lease), and other claims in flight are never cut off.

The faults are injected into the real store's writes (the statements never reach the
database), as a restart would make them fail.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import tidings
from tests.dispatch.helpers import LOOPBACK, settled, webhook
from tests.sink import Answer, Sink
from tidings.channels.registry import Registry, builtin_adapters
from tidings.core.errors import StoreError
from tidings.core.model import AttemptRecord
from tidings.core.states import AttemptStatus, State
from tidings.dispatch import Dispatcher, DispatcherConfig, sending
from tidings.store import Store


class FailingWrites(Store):
    """Fails `mark_sent`: the first `times` calls, or every call for the first token seen."""

    def __init__(self, url: str, *, times: int = 0, stuck: bool = False) -> None:
        super().__init__(url)
        self.times = times
        self.stuck = stuck
        self.stuck_token: str | None = None
        self.stuck_ids: list[int] = []
        self.claimed: dict[str, list[int]] = {}  # token -> the claim's rows

    async def claim_express(self, *args: Any, **kw: Any) -> Any:
        return self._remember(await super().claim_express(*args, **kw))

    async def claim_realtime(self, *args: Any, **kw: Any) -> Any:
        return self._remember(await super().claim_realtime(*args, **kw))

    def _remember(self, claim: Any) -> Any:
        if claim is not None:
            self.claimed[claim.token] = list(claim.ids)
        return claim

    def stuck_claim(self) -> list[int]:
        """Every row of the claim that could not record: besides those it sent, those that
        timed out or waited too long to start, whose writes come after the one that failed."""
        return self.claimed[self.stuck_token] if self.stuck_token else []

    async def mark_sent(
        self, token: str, ids: Sequence[int], attempts: Sequence[AttemptRecord] = (), **kw: Any
    ) -> int:
        if self.stuck and self.stuck_token in (None, token):
            self.stuck_token = token
            self.stuck_ids = list(ids)
            raise StoreError("database error: the connection was closed in the middle of it")
        if self.times > 0:
            self.times -= 1
            raise StoreError("database error: server closed the connection unexpectedly")
        return await super().mark_sent(token, ids, attempts, **kw)


async def _drain(store: Store, hub: tidings.Hub, count: int, **config: Any) -> list[Any]:
    config.setdefault("poll_interval_s", 0.2)
    dispatcher = Dispatcher(
        store,
        Registry(builtin_adapters()),
        DispatcherConfig(worker_id="w", allowed_networks=LOOPBACK, **config),
        notifier=hub.notifier,
    )
    task = asyncio.create_task(dispatcher.run())
    try:
        return await settled(hub, count, timeout_s=30)
    finally:
        dispatcher.stop()
        await asyncio.wait_for(task, 30)


async def test_outcomes_are_recorded_once_the_database_is_back(
    hub: tidings.Hub, sink: Sink, db_url: str
) -> None:
    await webhook(hub, sink.url("/hook"))
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(5)])
    store = FailingWrites(db_url, times=3)
    try:
        rows = await _drain(store, hub, 5)
    finally:
        await store.close()
    assert [r.state for r in rows] == [State.SENT] * 5
    assert [r.attempts for r in rows] == [1] * 5
    assert sink.count("/hook") == 5  # none sent twice
    for row in rows:
        log = (await hub.delivery(row.id)).attempts_log
        assert [a.status for a in log] == [AttemptStatus.DELIVERED]  # recorded once


async def test_a_claim_that_cannot_record_does_not_cut_off_the_others(
    hub: tidings.Hub, sink: Sink, db_url: str
) -> None:
    """One claim's outcomes cannot be written until its lease is over; the claims beside it
    finish their sends and record them, so each of their requests is audited and none of
    their rows is sent again for a lost lease."""
    sink.default("/hook", Answer(200, delay_s=0.2))
    await webhook(hub, sink.url("/hook"), timeout_s=0.5)
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(12)])
    store = FailingWrites(db_url, stuck=True)
    try:
        rows = await _drain(store, hub, 12, lease_s=2.0, claim_size=3, concurrency=4)
    finally:
        await store.close()
    assert [r.state for r in rows] == [State.SENT] * 12
    posts = Counter(json.loads(r.body)["delivery_id"] for r in sink.requests("/hook"))
    assert store.stuck_ids, "the fault was never hit"
    others = {r.id for r in rows} - set(store.stuck_claim())
    assert others
    # Each of their requests has its attempt row, and none lost its lease: not cut off. (A
    # busy machine may time a 0.2 s answer out against the 0.5 s timeout: a retry, audited.)
    logs = {i: (await hub.delivery(i)).attempts_log for i in others}
    assert {i: posts[i] for i in others} == {i: len(log) for i, log in logs.items()}
    for log in logs.values():
        assert log[-1].status is AttemptStatus.DELIVERED
        assert all(a.status is not AttemptStatus.LEASE_LOST for a in log)
        assert all(a.error != sending.INTERRUPTED_ERROR for a in log)  # nor cancelled
