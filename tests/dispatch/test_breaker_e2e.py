"""H1 end to end, with a real worker process and a real receiver that goes down and comes
back: the breaker opens, the channel's rows wait (no attempts, no sends), one probe goes per
backoff, and once the receiver is back the backlog drains; H2 events tell the ops channel."""

from __future__ import annotations

import itertools
from pathlib import Path

import tidings
from tests.dispatch.helpers import eventually, settled, webhook
from tests.dispatch.workers import workers
from tests.sink import Answer, Sink
from tidings.core.states import State

BACKOFF_S = 1.0


async def test_h1_a_down_receiver_opens_the_breaker_and_the_backlog_waits_then_drains(
    hub: tidings.Hub, sink: Sink, db_url: str, tmp_path: Path
) -> None:
    sink.default("/hook", Answer(503, "down for maintenance"))
    hook = await webhook(
        hub,
        sink.url("/hook"),
        filter={"kinds": ["app.*"]},
        max_attempts=10,
        retry_backoff_s=0.05,
        timeout_s=0.5,
    )
    ops = await hub.channels.create(
        name="ops", kind="inbox", filter={"kinds": ["tidings.*"]}, timeout_s=0.5
    )
    await hub.publish_many([{"kind": "app.event", "subject": f"s{i}"} for i in range(12)])
    settings = {"breaker_failures": 3, "breaker_backoff_s": BACKOFF_S}
    with workers(tmp_path, db_url, "w", claim_size=1, concurrency=1, **settings):

        async def probed_twice() -> bool:
            # A failed probe doubles the wait before the next one.
            health = (await hub.store.breakers()).get(hook.id)
            return health is not None and health.backoff_s >= 2 * BACKOFF_S * 0.99

        await eventually(probed_twice, timeout_s=30, what="a probe failing")
        sink.default("/hook", Answer(200, "ok"))
        rows = await settled(hub, 12 + 2, timeout_s=60)  # and the two ops events
    got = sink.requests("/hook")
    # While open nothing is sent but a probe per backoff, each wait twice the one before.
    waits = [b.at - a.at for a, b in itertools.pairwise(got) if b.at - a.at >= BACKOFF_S * 0.9]
    assert len(waits) >= 2, waits
    assert waits[1] >= waits[0] * 1.5
    sent = [r for r in rows if r.channel_id == hook.id]
    assert [r.state for r in sent] == [State.SENT] * 12
    assert sum(r.attempts for r in sent) == len(got)  # no attempt spent without a send
    ops_rows = await hub.deliveries(tidings.DeliveryQuery(channel_id=ops.id))
    assert sorted(v.event_kind for v in ops_rows.items) == [
        "tidings.channel.breaker_opened",
        "tidings.channel.recovered",
    ]
