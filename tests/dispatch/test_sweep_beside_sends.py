"""C2 on a channel a dispatcher keeps claiming: its due sweep does not hold up the claim.

A dispatcher sweeps each channel it claims every few seconds (lost leases released, spent
and expired rows ended). The sweep used to ride in the claim, which then took the full
claim's round trips: on a trickle of single events, one event in five waited for them. Now
an express claim goes first and the sweep runs beside its sends; a lease it releases is
claimed once the job ends, so nothing is left behind.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

import tidings
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Sink
from tidings.core.states import AttemptStatus, State
from tidings.dispatch import dispatcher
from tidings.dispatch.jobs import JobContext
from tidings.store import Store


class Watched(Store):
    """Counts the full claims and the sweeps the dispatcher asks for."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.full_claims = 0
        self.sweeps = 0

    async def claim_realtime(self, *args: Any, **kw: Any) -> Any:
        self.full_claims += 1
        return await super().claim_realtime(*args, **kw)

    async def sweep(self, *args: Any, **kw: Any) -> int:
        self.sweeps += 1
        return await super().sweep(*args, **kw)


async def test_c2_a_due_sweep_runs_beside_an_express_claim_and_its_lost_lease_is_sent(
    hub: tidings.Hub, sink: Sink, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ch = await webhook(hub, sink.url("/hook"), rate_per_min=0)
    published = await hub.publish_many(
        [{"kind": "a.b", "subject": "lost"}, {"kind": "a.b", "subject": "fresh"}]
    )
    lost_id = published[0].deliveries[0].id
    # A worker that died holding the oldest row: its lease is already over.
    gone = await hub.store.claim_realtime(ch.id, 1, 0.001, "gone")
    assert gone is not None
    assert gone.ids == [lost_id]
    # This dispatcher swept the channel long ago: its sweep is due at its first claim.
    long_ago = {ch.id: float("-inf")}
    monkeypatch.setattr(dispatcher, "JobContext", functools.partial(JobContext, swept_at=long_ago))
    store = Watched(db_url)
    try:
        async with running(hub, store=store, worker_id="w"):
            rows = await settled(hub, 2, timeout_s=20)
    finally:
        await store.close()
    assert [r.state for r in rows] == [State.SENT, State.SENT]
    released = next(r for r in rows if r.id == lost_id)
    assert (released.attempts, released.lost_leases) == (1, 1)
    log = (await hub.delivery(released.id)).attempts_log
    assert [(a.worker_id, a.status) for a in log] == [
        ("gone", AttemptStatus.LEASE_LOST),
        ("w", AttemptStatus.DELIVERED),
    ]
    assert sink.count("/hook") == 2
    if hub.store.backend == "postgresql":
        # The express claim took the fresh row at once and the sweep ran beside it: no
        # full claim at all (the released row went express too, once the job ended).
        assert store.sweeps >= 1
        assert store.full_claims == 0
