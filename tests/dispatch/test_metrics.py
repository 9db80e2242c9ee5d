"""The dispatcher's own counters, as a Prometheus scrape shows them."""

from __future__ import annotations

import asyncio

import tidings
from tests.dispatch.helpers import LOOPBACK, settled, webhook
from tests.sink import Answer, Sink
from tidings.channels.registry import Registry, builtin_adapters
from tidings.dispatch import Dispatcher, DispatcherConfig
from tidings.metrics import Metrics


async def test_attempts_and_send_times_are_counted_by_kind_and_status(
    hub: tidings.Hub, sink: Sink
) -> None:
    await webhook(hub, sink.url("/hook"))
    sink.script("/hook", Answer(status=200), Answer(status=400), Answer(status=200))
    metrics = Metrics(hub.store)
    config = DispatcherConfig(
        worker_id="metrics", poll_interval_s=0.2, allowed_networks=LOOPBACK, claim_size=1
    )
    dispatcher = Dispatcher(
        hub.store, Registry(builtin_adapters()), config, metrics=metrics, notifier=hub.notifier
    )
    task = asyncio.create_task(dispatcher.run())
    try:
        for i in range(3):
            await hub.publish(kind="a.b", subject=f"s{i}")
        await settled(hub, 3)
    finally:
        dispatcher.stop()
        await asyncio.wait_for(task, 30)
    scrape = (await metrics.render()).decode()
    assert 'tidings_attempts_total{kind="webhook",status="delivered"} 2.0' in scrape
    assert 'tidings_attempts_total{kind="webhook",status="permanent"} 1.0' in scrape
    assert 'tidings_send_seconds_count{kind="webhook"} 3.0' in scrape
    assert 'tidings_claimed_deliveries_total{mode="realtime"} 3.0' in scrape
