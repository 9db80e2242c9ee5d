"""H1 and H2 in the store, on both backends: the breaker opens on retryable failures, rows
wait without spending attempts, one probe goes at a time, a success closes it; failing long
enough disables the channel; each change is announced as an operational event."""

from __future__ import annotations

import tidings
from tests.store.helpers import at, channel, claim, publish, states
from tidings.core.breaker import BreakerState, Policy
from tidings.core.states import SkipReason, State

POLICY = Policy(failures=3, disable_after_s=600, first_backoff_s=30, max_backoff_s=120)


async def _fail(hub: tidings.Hub, ch: tidings.Channel, count: int, seconds: float) -> None:
    await hub.store.record_health(ch.id, False, count, "HTTP 503", POLICY, now=at(seconds))


async def _ops(hub: tidings.Hub) -> tidings.Channel:
    return await channel(hub, "ops", filter={"kinds": ["tidings.*"]})


async def _op_events(hub: tidings.Hub, ops: tidings.Channel) -> list[tuple[str, str]]:
    page = await hub.deliveries(tidings.DeliveryQuery(channel_id=ops.id), page_size=200)
    return sorted((v.event_kind, v.subject) for v in page.items)


async def test_h1_the_breaker_opens_and_rows_wait_without_spending_attempts(
    hub: tidings.Hub,
) -> None:
    ch = await channel(hub, "hook", filter={"kinds": ["app.*"]})
    await publish(hub, 4, kind="app.event")
    await _fail(hub, ch, 2, 0)
    assert await claim(hub, ch, limit=1, now=at(1))  # still closed: leases
    await _fail(hub, ch, 1, 2)
    assert (await hub.store.breakers())[ch.id].state is BreakerState.OPEN
    before = await states(hub)
    assert await hub.store.claim_realtime(ch.id, 10, 60, "w", now=at(20)) is None
    assert await states(hub) == before  # nothing leased, no attempt spent


async def test_h1_one_probe_at_a_time_then_a_success_closes_it(hub: tidings.Hub) -> None:
    ch = await channel(hub, "hook")
    await publish(hub, 5)
    await _fail(hub, ch, 3, 0)
    probe = await claim(hub, ch, limit=10, now=at(31))
    assert len(probe) == 1  # the probe
    assert await hub.store.claim_realtime(ch.id, 10, 60, "other", now=at(32)) is None
    assert (await hub.store.breakers())[ch.id].state is BreakerState.HALF_OPEN
    await hub.store.mark_sent(probe.token, probe.ids)
    await hub.store.record_health(ch.id, True, 0, "", POLICY, now=at(33))
    assert ch.id not in await hub.store.breakers()  # healthy again
    rest = await claim(hub, ch, limit=10, now=at(34))
    assert len(rest) == 4  # the backlog drains


async def test_h1_a_failed_probe_reopens_it_for_twice_as_long(hub: tidings.Hub) -> None:
    ch = await channel(hub, "hook")
    await publish(hub, 2)
    await _fail(hub, ch, 3, 0)
    probe = await claim(hub, ch, now=at(31))
    await hub.store.schedule_retry(probe.token, probe.ids, 0.0, "HTTP 503", now=at(32))
    await _fail(hub, ch, 1, 32)
    health = (await hub.store.breakers())[ch.id]
    assert (health.state, health.until) == (BreakerState.OPEN, health.until)
    assert health.until is not None
    assert 59 < (health.until - at(32)).total_seconds() < 61
    assert await hub.store.claim_realtime(ch.id, 10, 60, "w", now=at(80)) is None


async def test_h1_h2_failing_too_long_disables_the_channel_and_says_so(
    hub: tidings.Hub,
) -> None:
    ops = await _ops(hub)
    ch = await channel(hub, "hook", filter={"kinds": ["app.*"]})
    await publish(hub, 2, kind="app.event")
    await _fail(hub, ch, 1, 0)
    await _fail(hub, ch, 1, 300)
    assert (await hub.channels.get(ch.id)).enabled
    await _fail(hub, ch, 1, 600)
    disabled = await hub.channels.get(ch.id)
    assert not disabled.enabled
    assert "failing for 600 s" in (disabled.disabled_reason or "")
    rows = [r for r in (await states(hub)).values() if r.channel_id == ch.id]
    assert {(r.state, r.skip_reason) for r in rows} == {
        (State.SKIPPED, SkipReason.CHANNEL_DISABLED)
    }
    assert await _op_events(hub, ops) == [
        ("tidings.channel.breaker_opened", "channel:hook"),
        ("tidings.channel.disabled", "channel:hook"),
    ]


async def test_h2_opened_and_recovered_go_to_channels_that_ask_never_to_the_one_concerned(
    hub: tidings.Hub,
) -> None:
    ops = await _ops(hub)
    everything = await channel(hub, "everything")  # no filter: producers' events only
    await _fail(hub, ops, 3, 0)  # the ops channel itself fails
    ch = await channel(hub, "hook", filter={"kinds": ["app.*"]})
    await _fail(hub, ch, 3, 0)
    await hub.store.record_health(ch.id, True, 0, "", POLICY, now=at(40))
    assert await _op_events(hub, ops) == [
        ("tidings.channel.breaker_opened", "channel:hook"),
        ("tidings.channel.recovered", "channel:hook"),
    ]
    assert (await hub.deliveries(tidings.DeliveryQuery(channel_id=everything.id))).total == 0


async def test_an_operators_enable_starts_the_channel_afresh(hub: tidings.Hub) -> None:
    ch = await channel(hub, "hook")
    await publish(hub, 1)
    await _fail(hub, ch, 3, 0)
    await hub.channels.disable(ch.id)
    await hub.channels.enable(ch.id)
    assert ch.id not in await hub.store.breakers()
