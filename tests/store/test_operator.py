"""M1 (resend) and M2 (history): what operators do when an alert did not arrive."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

import tidings
from tests.conftest import count
from tests.store.helpers import at, channel, claim, publish, states
from tidings.core.states import State


async def _failed(hub: tidings.Hub) -> int:
    ch = await channel(hub, "resendable")
    await publish(hub, 1)
    got = await claim(hub, ch)
    await hub.store.fail(got.token, got.ids, "HTTP 401: bad token")
    return got.ids[0]


async def test_m1_resend_requeues_a_failed_delivery(hub: tidings.Hub) -> None:
    delivery_id = await _failed(hub)
    result = await hub.resend(delivery_id, operator="alice", request_id="req-1")
    assert result.requeued
    row = result.delivery
    assert (row.state, row.attempts, row.last_error, row.failure) == (State.PENDING, 0, None, None)
    assert abs(row.next_attempt_at - datetime.now(UTC)) < timedelta(seconds=10)
    assert await count(hub, "resends") == 1


async def test_m1_resend_requeues_a_skipped_delivery(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await hub.channels.disable(ch.id)
    (published,) = await publish(hub, 1)
    await hub.channels.enable(ch.id)
    result = await hub.resend(published.deliveries[0].id, operator="bob")
    assert result.delivery.state is State.PENDING
    assert result.delivery.skip_reason is None


async def test_m1_same_request_id_twice_requeues_once(hub: tidings.Hub) -> None:
    delivery_id = await _failed(hub)
    await hub.resend(delivery_id, operator="alice", request_id="req-1")
    ch = await hub.channels.get_by_name("resendable")
    await claim(hub, ch, now=at(1))  # the requeued row is in flight again
    repeat = await hub.resend(delivery_id, operator="alice", request_id="req-1")
    assert not repeat.requeued
    assert repeat.delivery.state is State.SENDING
    assert repeat.delivery.attempts == 1
    assert await count(hub, "resends") == 1


async def test_m1_resend_of_a_pending_row_is_a_conflict_and_changes_nothing(
    hub: tidings.Hub,
) -> None:
    await channel(hub)
    (published,) = await publish(hub, 1)
    delivery_id = published.deliveries[0].id
    before = await states(hub)
    with pytest.raises(tidings.Conflict, match="pending"):
        await hub.resend(delivery_id, operator="alice", request_id="r")
    assert await states(hub) == before
    assert await count(hub, "resends") == 0


async def test_m1_resend_of_an_unknown_id_is_not_found(hub: tidings.Hub) -> None:
    with pytest.raises(tidings.NotFound, match="delivery 999 not found"):
        await hub.resend(999, operator="alice", request_id="r")
    assert await count(hub, "resends") == 0


async def test_m1_request_id_reused_for_another_delivery_is_a_conflict(hub: tidings.Hub) -> None:
    delivery_id = await _failed(hub)
    await hub.resend(delivery_id, operator="alice", request_id="shared")
    ch = await hub.channels.get_by_name("resendable")
    (other,) = await publish(hub, 1, subject="other")
    got = await claim(hub, ch, now=at(1))
    await hub.store.fail(got.token, got.ids, "x")
    with pytest.raises(tidings.Conflict, match="already used"):
        await hub.resend(other.deliveries[0].id, operator="alice", request_id="shared")


async def test_m1_two_concurrent_resends_requeue_once(hub: tidings.Hub, db_url: str) -> None:
    delivery_id = await _failed(hub)
    async with tidings.Hub(db_url) as a, tidings.Hub(db_url) as b:
        results = await asyncio.gather(
            a.resend(delivery_id, operator="alice", request_id="ra"),
            b.resend(delivery_id, operator="bob", request_id="rb"),
            return_exceptions=True,
        )
    requeued = [r for r in results if isinstance(r, tidings.ResendResult) and r.requeued]
    conflicts = [r for r in results if isinstance(r, tidings.Conflict)]
    assert len(requeued) == 1, results
    assert len(conflicts) == 1, results
    assert await count(hub, "resends") == 1


async def test_m1_concurrent_resends_with_one_request_id_requeue_once(
    hub: tidings.Hub, db_url: str
) -> None:
    delivery_id = await _failed(hub)
    async with tidings.Hub(db_url) as a, tidings.Hub(db_url) as b:
        results = await asyncio.gather(
            a.resend(delivery_id, operator="alice", request_id="same"),
            b.resend(delivery_id, operator="alice", request_id="same"),
        )
    assert sorted(r.requeued for r in results) == [False, True]
    assert await count(hub, "resends") == 1


async def _history(hub: tidings.Hub) -> dict[str, tidings.Channel]:
    a = await channel(hub, "a")
    b = await channel(hub, "b", kind="webhook", config={"url": "http://127.0.0.1:9/"})
    await hub.publish(kind="finding.created", subject="f:1", title="one", tenant="acme")
    await hub.publish(kind="monitor.down", subject="m:1", title="two", tenant="globex")
    await hub.publish(kind="finding.created", subject="f:2", title="three")
    got = await claim(hub, a, limit=1)
    await hub.store.fail(got.token, got.ids, "nope")
    return {"a": a, "b": b}


async def test_m2_lists_newest_first_with_channel_and_event_fields(hub: tidings.Hub) -> None:
    chans = await _history(hub)
    page = await hub.deliveries()
    assert page.total == 6
    ids = [v.delivery.id for v in page.items]
    assert ids == sorted(ids, reverse=True)
    newest = page.items[0]
    assert newest.event_kind == "finding.created"
    assert newest.subject == "f:2"
    assert newest.title == "three"
    assert newest.channel_name == "b"
    assert newest.channel_kind == "webhook"
    assert newest.delivery.channel_id == chans["b"].id


async def test_m2_every_filter(hub: tidings.Hub) -> None:
    chans = await _history(hub)
    by_channel = await hub.deliveries(tidings.DeliveryQuery(channel_id=chans["a"].id))
    assert by_channel.total == 3
    assert {v.channel_name for v in by_channel.items} == {"a"}
    failed = await hub.deliveries(tidings.DeliveryQuery(state=State.FAILED))
    assert [(v.channel_name, v.subject) for v in failed.items] == [("a", "f:1")]
    monitors = await hub.deliveries(tidings.DeliveryQuery(event_kind="monitor.down"))
    assert monitors.total == 2
    assert {v.subject for v in monitors.items} == {"m:1"}
    acme = await hub.deliveries(tidings.DeliveryQuery(tenant="acme"))
    assert {v.subject for v in acme.items} == {"f:1"}
    assert acme.total == 2
    combined = await hub.deliveries(
        tidings.DeliveryQuery(channel_id=chans["b"].id, event_kind="finding.created")
    )
    assert combined.total == 2


async def test_m2_time_range_compares_created_at(hub: tidings.Hub) -> None:
    await _history(hub)
    everything = await hub.deliveries()
    stamps = sorted({v.delivery.created_at for v in everything.items})
    since_last = await hub.deliveries(tidings.DeliveryQuery(since=stamps[-1]))
    assert {v.subject for v in since_last.items} == {"f:2"}
    until_first = await hub.deliveries(tidings.DeliveryQuery(until=stamps[0]))
    assert {v.subject for v in until_first.items} == {"f:1"}
    future = await hub.deliveries(tidings.DeliveryQuery(since=at(3600)))
    assert future.total == 0
    assert future.items == []
    window = await hub.deliveries(tidings.DeliveryQuery(since=at(-3600), until=at(3600)))
    assert window.total == 6


@pytest.mark.parametrize(
    ("page", "page_size", "used_page", "used_size"),
    [
        (None, None, 1, 50),
        (0, 10, 1, 10),
        (-5, 10, 1, 10),
        (2, 0, 2, 50),
        (1, 201, 1, 50),
        (1, -1, 1, 50),
        (3, 200, 3, 200),
        (2, 1, 2, 1),
    ],
)
async def test_m2_page_and_page_size_coercion(
    hub: tidings.Hub, page: int | None, page_size: int | None, used_page: int, used_size: int
) -> None:
    await channel(hub)
    await publish(hub, 3)
    got = await hub.deliveries(page=page, page_size=page_size)
    assert (got.page, got.page_size, got.total) == (used_page, used_size, 3)
    everything = sorted((await states(hub)).keys(), reverse=True)
    start = (used_page - 1) * used_size
    assert [v.delivery.id for v in got.items] == everything[start : start + used_size]


async def test_m2_detail_adds_the_attempts(hub: tidings.Hub) -> None:
    await _history(hub)
    failed = (await hub.deliveries(tidings.DeliveryQuery(state=State.FAILED))).items[0]
    detail = await hub.delivery(failed.delivery.id)
    assert detail.view == failed
    with pytest.raises(tidings.NotFound):
        await hub.delivery(12345)
