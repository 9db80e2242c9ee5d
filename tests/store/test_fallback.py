"""F1 fallback channels and the failed-delivery event (H2), on both backends: a delivery that
ends failed escalates to its channel's fallback in the same transaction, once."""

from __future__ import annotations

import pytest

import tidings
from tests.store.helpers import at, channel, claim, publish, states
from tidings.core.errors import ValidationError
from tidings.core.states import Failure, SkipReason, State


async def _pair(hub: tidings.Hub, **fields: object) -> tuple[tidings.Channel, tidings.Channel]:
    email = await channel(hub, "oncall-email", filter={"kinds": ["none.*"]})
    robot = await channel(
        hub, "robot", fallback_channel_id=email.id, filter={"kinds": ["app.*"]}, **fields
    )
    return robot, email


async def test_f1_a_permanent_failure_escalates_to_the_fallback_once(hub: tidings.Hub) -> None:
    robot, email = await _pair(hub)
    (published,) = await publish(hub, 1, kind="app.down")
    got = await claim(hub, robot)
    assert await hub.store.fail(got.token, got.ids, "HTTP 404: robot removed") == 1
    rows = await states(hub)
    (escalated,) = [r for r in rows.values() if r.channel_id == email.id]
    assert escalated.event_id == published.event.id
    assert (escalated.state, escalated.fallback_of) == (State.PENDING, got.ids[0])
    # Failing again (after a resend) does not escalate twice: one delivery per event and channel.
    await hub.resend(got.ids[0])
    again = await claim(hub, robot)
    await hub.store.fail(again.token, again.ids, "HTTP 404")
    assert len([r for r in (await states(hub)).values() if r.channel_id == email.id]) == 1


async def test_f1_exhausted_and_expired_rows_escalate_too(hub: tidings.Hub) -> None:
    robot, email = await _pair(hub, max_attempts=1, max_age_s=60)
    await publish(hub, 2, kind="app.down")
    first = await claim(hub, robot, limit=1)
    await hub.store.exhaust(first.token, first.ids, "HTTP 500")
    await hub.store.sweep(robot.id, now=at(120))  # the other is older than max_age_s now
    rows = await states(hub)
    failed = {r.id: r.failure for r in rows.values() if r.channel_id == robot.id}
    assert sorted(failed.values()) == [Failure.EXHAUSTED, Failure.EXPIRED]
    escalated = {r.fallback_of for r in rows.values() if r.channel_id == email.id}
    assert escalated == set(failed)


async def test_f1_a_disabled_fallback_gets_a_skipped_row(hub: tidings.Hub) -> None:
    robot, email = await _pair(hub)
    await hub.channels.disable(email.id)
    await publish(hub, 1, kind="app.down")
    got = await claim(hub, robot)
    await hub.store.fail(got.token, got.ids, "HTTP 404")
    (escalated,) = [r for r in (await states(hub)).values() if r.channel_id == email.id]
    assert (escalated.state, escalated.skip_reason) == (
        State.SKIPPED,
        SkipReason.CHANNEL_DISABLED,
    )


async def test_h2_a_failed_delivery_is_announced_but_not_a_failed_announcement(
    hub: tidings.Hub,
) -> None:
    ops = await channel(hub, "ops", filter={"kinds": ["tidings.delivery.*"]})
    app = await channel(hub, "app", filter={"kinds": ["app.*"]})
    await publish(hub, 1, kind="app.down", subject="web-1")
    got = await claim(hub, app)
    await hub.store.fail(got.token, got.ids, "HTTP 401: bad token")
    page = await hub.deliveries(tidings.DeliveryQuery(channel_id=ops.id))
    (announced,) = page.items
    assert (announced.event_kind, announced.subject) == (
        "tidings.delivery.failed",
        f"delivery:{got.ids[0]}",
    )
    event = (await hub.get_event(announced.delivery.event_id)).event
    assert event.data["failure"] == "permanent"
    assert event.data["error"] == "HTTP 401: bad token"
    # The announcement itself fails: nothing more is announced.
    op_claim = await claim(hub, ops)
    await hub.store.fail(op_claim.token, op_claim.ids, "HTTP 410")
    assert (await hub.deliveries(tidings.DeliveryQuery(channel_id=ops.id))).total == 1


@pytest.mark.parametrize("shape", ["self", "unknown", "cycle", "too long"])
async def test_f1_fallback_chains_are_checked_when_saved(hub: tidings.Hub, shape: str) -> None:
    a = await channel(hub, "a")
    b = await channel(hub, "b", fallback_channel_id=a.id)
    c = await channel(hub, "c", fallback_channel_id=b.id)
    d = await channel(hub, "d", fallback_channel_id=c.id)  # d → c → b → a: three links
    attempts = {
        "self": lambda: hub.channels.update(a.id, fallback_channel_id=a.id),
        "unknown": lambda: hub.channels.create(name="e", kind="inbox", fallback_channel_id=999),
        "cycle": lambda: hub.channels.update(a.id, fallback_channel_id=d.id),
        "too long": lambda: hub.channels.create(name="e", kind="inbox", fallback_channel_id=d.id),
    }
    with pytest.raises(ValidationError) as caught:
        await attempts[shape]()
    assert caught.value.field == "fallback_channel_id"
    assert (await hub.channels.get(a.id)).fallback_channel_id is None  # nothing changed
