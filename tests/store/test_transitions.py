"""The state table is in charge: every transition is driven from every state on both backends,
and exactly the table's transitions change the row — to the table's target state.

Each row is put in its starting state directly (the conformance suite tests the store's
writes, not the paths that usually lead there), leased with token `TOKEN`, due, with one
attempt spent of three (and, for `exhaust_lost`, three leases lost already).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

import tidings
from tests.store.helpers import channel, publish, states
from tidings.core.errors import Conflict
from tidings.core.states import TRANSITIONS, Guard, State
from tidings.store.schema import channels, deliveries

TOKEN = "t" * 32
MAX_ATTEMPTS = 3
ROW_CREATORS = {"publish", "publish_skipped"}

Drive = Callable[[tidings.Hub, int, int], Awaitable[object]]


async def _claim(hub: tidings.Hub, channel_id: int, _id: int) -> object:
    return await hub.store.claim_realtime(channel_id, 10, 60.0, "another-worker")


async def _sweep(hub: tidings.Hub, channel_id: int, _id: int) -> object:
    return await hub.store.sweep(channel_id)


async def _resend(hub: tidings.Hub, _channel_id: int, delivery_id: int) -> object:
    try:
        return await hub.store.resend(delivery_id, "operator", f"request-{delivery_id}")
    except Conflict:
        return None


#: How each transition is driven through the store's API.
DRIVERS: dict[str, Drive] = {
    "claim": _claim,
    "mark_sent": lambda hub, _c, i: hub.store.mark_sent(TOKEN, [i]),
    "schedule_retry": lambda hub, _c, i: hub.store.schedule_retry(TOKEN, [i], 1.0, "HTTP 500"),
    "exhaust": lambda hub, _c, i: hub.store.exhaust(TOKEN, [i], "HTTP 500"),
    "fail": lambda hub, _c, i: hub.store.fail(TOKEN, [i], "HTTP 404"),
    "rate_limited": lambda hub, c, i: hub.store.rate_limited(TOKEN, c, [i], 1.0, "HTTP 429"),
    "defer": lambda hub, _c, i: hub.store.defer(TOKEN, [i]),
    "skip_on_return": lambda hub, _c, i: hub.store.defer(TOKEN, [i]),  # channel disabled first
    "release_lost": _sweep,
    "exhaust_lost": _sweep,  # with every attempt spent
    "expire": _sweep,  # on a channel with a deadline the row is past
    "skip": lambda hub, c, _i: hub.store.disable_channel(c),
    "resend": _resend,
}


def test_every_transition_has_a_driver() -> None:
    assert set(DRIVERS) == set(TRANSITIONS) - ROW_CREATORS


async def _row_in(hub: tidings.Hub, name: str, state: State) -> tuple[int, int]:
    """A channel and one delivery of it in `state`, set up for transition `name`."""
    fields: dict[str, Any] = {"max_attempts": MAX_ATTEMPTS}
    if name == "expire":
        fields["max_age_s"] = 60.0
    ch = await channel(hub, **fields)
    (published,) = await publish(hub, 1)
    delivery_id = published.deliveries[0].id
    past = datetime.now(UTC) - timedelta(hours=1)
    values: dict[str, Any] = {
        "state": state.value,
        "attempts": 1,
        # exhaust_lost: the row keeps killing workers; this lost lease is one too many.
        "lost_leases": MAX_ATTEMPTS if name == "exhaust_lost" else 0,
        "next_attempt_at": past,  # due, or a lease that ran out
        "lease_token": TOKEN,
        "lease_owner": "a-worker",
    }
    if name == "expire":
        values["created_at"] = past
    async with hub.store.engine.begin() as conn:
        await conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(values))
        if name == "skip_on_return":
            await conn.execute(update(channels).where(channels.c.id == ch.id).values(enabled=False))
    return ch.id, delivery_id


@pytest.mark.parametrize("state", list(State), ids=lambda s: s.value)
@pytest.mark.parametrize("name", sorted(set(TRANSITIONS) - ROW_CREATORS))
async def test_exactly_the_tables_transitions_succeed(
    hub: tidings.Hub, name: str, state: State
) -> None:
    transition = TRANSITIONS[name]
    channel_id, delivery_id = await _row_in(hub, name, state)
    await DRIVERS[name](hub, channel_id, delivery_id)
    after = (await states(hub))[delivery_id]
    if state in transition.sources:
        assert after.state is transition.target, f"{name} from {state.value}"
    else:
        assert after.state is state, f"{name} must not start from {state.value}"


LEASED = sorted(n for n, t in TRANSITIONS.items() if t.guard is Guard.LEASE)


@pytest.mark.parametrize("name", LEASED)
async def test_a_lease_guarded_transition_with_another_token_changes_nothing(
    hub: tidings.Hub, name: str
) -> None:
    channel_id, delivery_id = await _row_in(hub, name, State.SENDING)
    async with hub.store.engine.begin() as conn:
        await conn.execute(
            update(deliveries).where(deliveries.c.id == delivery_id).values(lease_token="x" * 32)
        )
    await DRIVERS[name](hub, channel_id, delivery_id)
    assert (await states(hub))[delivery_id].state is State.SENDING


DUE = sorted(n for n, t in TRANSITIONS.items() if t.guard is Guard.DUE)


@pytest.mark.parametrize("name", DUE)
async def test_a_due_guarded_transition_waits_for_the_due_time(hub: tidings.Hub, name: str) -> None:
    """A live lease is not swept or claimed; a pending row waits for its time."""
    channel_id, delivery_id = await _row_in(hub, name, State.SENDING)
    later = datetime.now(UTC) + timedelta(minutes=10)
    async with hub.store.engine.begin() as conn:
        await conn.execute(
            update(deliveries).where(deliveries.c.id == delivery_id).values(next_attempt_at=later)
        )
    await DRIVERS[name](hub, channel_id, delivery_id)
    assert (await states(hub))[delivery_id].state is State.SENDING


async def test_publish_creates_pending_rows_and_skipped_ones_for_disabled_channels(
    hub: tidings.Hub,
) -> None:
    enabled = await channel(hub, "on")
    disabled = await channel(hub, "off", enabled=False)
    (published,) = await publish(hub, 1)
    by_channel = {d.channel_id: d.state for d in published.deliveries}
    assert by_channel == {
        enabled.id: TRANSITIONS["publish"].target,
        disabled.id: TRANSITIONS["publish_skipped"].target,
    }
