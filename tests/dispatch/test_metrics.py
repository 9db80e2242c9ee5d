"""The dispatcher's own counters, as a Prometheus scrape shows them."""

from __future__ import annotations

import asyncio

import tidings
from tests.dispatch.helpers import LOOPBACK, settled, webhook
from tests.sink import Answer, Sink
from tests.store.helpers import LEASE_S, attempt, claim, publish
from tidings.channels.registry import Registry, builtin_adapters
from tidings.core.states import AttemptStatus
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


async def test_the_scrape_follows_prometheus_conventions(hub: tidings.Hub) -> None:
    """Counters end in _total, no _created series, a 0 oldest-pending sample for a channel
    with nothing pending, and tidings_build_info; the text parses as the exposition format."""
    from prometheus_client.parser import text_string_to_metric_families

    await hub.channels.create(name="idle", kind="inbox", filter={"kinds": ["never.*"]})
    await hub.channels.create(name="busy", kind="inbox")
    await hub.publish(kind="a.b", subject="s")
    metrics = Metrics(hub.store)
    metrics.sent("inbox", "delivered", 0.01)
    metrics.claimed("realtime", 1)
    metrics.fenced(1)
    scrape = (await metrics.render()).decode()
    families = {f.name: f for f in text_string_to_metric_families(scrape)}
    samples = [s for f in families.values() for s in f.samples]
    assert not [s.name for s in samples if s.name.endswith("_created")]
    counters = [f for f in families.values() if f.type == "counter"]
    assert {f.name for f in counters} == {
        "tidings_attempts",
        "tidings_claimed_deliveries",
        "tidings_fenced_writes",
        "tidings_handed_deliveries",
        "tidings_purged_rows",
    }
    assert all(s.name.endswith("_total") for f in counters for s in f.samples)
    oldest = {
        s.labels["channel"]: s.value for s in families["tidings_oldest_pending_age_seconds"].samples
    }
    assert oldest["idle"] == 0
    assert oldest["busy"] >= 0
    assert set(oldest) == {"idle", "busy"}
    (build,) = families["tidings_build_info"].samples
    assert (build.labels["version"], build.value) == (tidings.__version__, 1)


async def test_the_deliveries_gauge_counts_the_queue_of_every_channel(hub: tidings.Hub) -> None:
    """Pending and sending rows by channel where there are any; rows that ended (sent,
    failed) are history, counted as they happen by tidings_attempts_total, not at a scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    busy = await hub.channels.create(name="busy", kind="inbox", filter={"kinds": ["a.*"]})
    await hub.channels.create(name="quiet", kind="inbox", filter={"kinds": ["never.*"]})
    await publish(hub, 2, kind="a.sent")
    sent = await claim(hub, busy, limit=2)
    assert (
        await hub.store.mark_sent(
            sent.token, sent.ids, [attempt(i, AttemptStatus.DELIVERED) for i in sent.ids]
        )
        == 2
    )
    await publish(hub, 1, kind="a.out")
    await claim(hub, busy, limit=1, lease_s=LEASE_S)  # sending, its lease running
    await publish(hub, 3, kind="a.waiting")
    scrape = (await Metrics(hub.store).render()).decode()
    (family,) = [
        f for f in text_string_to_metric_families(scrape) if f.name == "tidings_deliveries"
    ]
    counts = {(s.labels["channel"], s.labels["state"]): s.value for s in family.samples}
    assert counts == {("busy", "pending"): 3, ("busy", "sending"): 1}
