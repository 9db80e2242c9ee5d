"""D1–D4: when a digest is due, what one claim takes, and its batch id."""

from __future__ import annotations

import tidings
from tests.store.helpers import LEASE_S, at, channel, claim, publish, states
from tidings.core.states import Failure, State
from tidings.store import MAX_DIGEST_BATCH


async def _digest(hub: tidings.Hub, period_s: float = 60.0, **fields: object) -> tidings.Channel:
    return await channel(hub, "digest", mode="digest", digest_period_s=period_s, **fields)


async def test_d1_due_only_once_the_oldest_row_is_a_period_old(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 60.0)
    assert not await hub.store.digest_due(ch.id)
    await publish(hub, 1)
    assert not await hub.store.digest_due(ch.id)
    assert not await hub.store.digest_due(ch.id, now=at(30))
    assert await hub.store.digest_due(ch.id, now=at(61))


async def test_d1_period_change_applies_to_rows_already_pending(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 3600.0)
    await publish(hub, 1)
    assert not await hub.store.digest_due(ch.id, now=at(120))
    await hub.channels.update(ch.id, digest_period_s=60.0)
    assert await hub.store.digest_due(ch.id, now=at(120))


async def test_d1_disabled_channel_is_never_due(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 1.0)
    await publish(hub, 1)
    await hub.channels.disable(ch.id)
    assert not await hub.store.digest_due(ch.id, now=at(60))


async def test_d2_claim_takes_young_rows_too_but_not_backoff_or_live_leases(
    hub: tidings.Hub,
) -> None:
    ch = await _digest(hub, 60.0)
    old = await publish(hub, 3)
    first = await hub.store.claim_digest(ch.id, LEASE_S, "w", limit=1)
    assert first is not None
    backoff = await hub.store.claim_digest(ch.id, LEASE_S, "w", limit=1)
    assert backoff is not None
    await hub.store.schedule_retry(backoff.token, backoff.ids, 600.0, "HTTP 500")
    young = await publish(hub, 2, subject="young")

    got = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(61))
    assert got is not None
    expected = [old[2].deliveries[0].id] + [r.deliveries[0].id for r in young]
    assert got.ids == expected  # oldest id first; the leased and the backoff row are not in it


async def test_d2_asking_ten_thousand_returns_at_most_500_and_overflow_stays_pending(
    hub: tidings.Hub,
) -> None:
    ch = await _digest(hub, 1.0)
    await publish(hub, MAX_DIGEST_BATCH + 20)
    got = await hub.store.claim_digest(ch.id, LEASE_S, "w", limit=10_000, now=at(2))
    assert got is not None
    assert len(got) == MAX_DIGEST_BATCH
    assert got.ids == sorted(got.ids)
    rows = await hub.deliveries(tidings.DeliveryQuery(state=State.PENDING), page_size=200)
    assert rows.total == 20
    assert min(r.delivery.id for r in rows.items) > max(got.ids)
    rest = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(3))
    assert rest is not None
    assert len(rest) == 20


async def test_d3_batch_id_is_the_smallest_id_and_kept_across_retries(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 1.0)
    await publish(hub, 3)
    first = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(2))
    assert first is not None
    assert {item.delivery.batch_id for item in first.items} == {min(first.ids)}
    await hub.store.schedule_retry(first.token, first.ids, 1.0, "HTTP 500", now=at(2))
    await publish(hub, 2, subject="later")
    second = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(10))
    assert second is not None
    assert len(second) == 5
    rows = await states(hub)
    assert {rows[i].batch_id for i in first.ids} == {min(first.ids)}
    assert {item.delivery.batch_id for item in second.items} == {min(first.ids)}


async def test_d3_batch_id_is_only_set_where_still_null(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 1.0)
    await publish(hub, 3)
    first = await hub.store.claim_digest(ch.id, LEASE_S, "w", limit=2, now=at(2))
    assert first is not None
    one, two = first.ids
    await hub.store.mark_sent(first.token, [one])
    await hub.store.schedule_retry(first.token, [two], 0.0, "HTTP 500", now=at(2))
    second = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(3))
    assert second is not None
    assert second.ids[0] == two
    three = second.ids[1]
    rows = await states(hub)
    assert rows[two].batch_id == one  # kept from its first batch
    assert rows[three].batch_id == two  # the new batch's smallest id


async def test_d4_a_digest_claim_spends_one_token_whatever_its_size(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 1.0, rate_per_min=1, rate_burst=1)
    await publish(hub, 50)
    got = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(2))
    assert got is not None
    assert len(got) == 50  # the batch is never shrunk to fit the rate
    await hub.store.defer(got.token, got.ids[25:])
    assert await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(3)) is None
    later = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(63))
    assert later is not None
    assert len(later) == 25


async def test_d5_defer_revokes_the_attempt_and_is_claimable_at_once(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 1.0)
    await publish(hub, 4)
    got = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(2))
    assert got is not None
    assert await hub.store.mark_sent(got.token, got.ids[:2]) == 2
    assert await hub.store.defer(got.token, got.ids[2:]) == 2
    rows = await states(hub)
    assert [rows[i].state for i in got.ids] == [State.SENT] * 2 + [State.PENDING] * 2
    assert [rows[i].attempts for i in got.ids[2:]] == [0, 0]
    again = await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(2.5))
    assert again is not None
    assert again.ids == got.ids[2:]


async def test_realtime_claim_ignores_digest_channels(hub: tidings.Hub) -> None:
    ch = await _digest(hub, 1.0)
    realtime = await channel(hub, "rt")
    await publish(hub, 1)
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(5)) is None
    assert len(await claim(hub, realtime, now=at(5))) == 1


async def test_d2_a_digest_claim_without_sweep_never_leases_what_the_sweep_would_end(
    hub: tidings.Hub,
) -> None:
    """A digest job sweeps on its first claim and then now and again: a spent lost lease (C2)
    or an expired row (O5) waits for the next sweep instead of going out."""
    ch = await _digest(hub, 1.0, max_attempts=1, max_age_s=60)
    await publish(hub, 1)
    assert await hub.store.claim_digest(ch.id, 1.0, "crashed", now=at(2)) is not None
    # Taken over once (max_attempts lost leases): the next loss ends it, for the sweep to do.
    spent = await hub.store.claim_digest(ch.id, 1.0, "crashed again", now=at(4))
    assert spent is not None
    young = await publish(hub, 1)  # published now: at(30) it is not yet expired
    got = await hub.store.claim_digest(ch.id, LEASE_S, "w", swept=False, now=at(30))
    assert got is not None
    assert got.ids == [young[0].deliveries[0].id]  # not the spent lease
    assert (await states(hub))[spent.ids[0]].state is State.SENDING  # left for the sweep
    await hub.store.mark_sent(got.token, got.ids)
    later = await publish(hub, 1)
    # At 400 s the spent lease and the last row (now older than max_age_s) are both for the
    # sweep to end: a claim without it takes neither, a claim with it ends both.
    assert await hub.store.claim_digest(ch.id, LEASE_S, "w", swept=False, now=at(400)) is None
    assert await hub.store.claim_digest(ch.id, LEASE_S, "w", now=at(400)) is None
    after = await states(hub)
    # (Both are past max_age_s by then, and expiry is what the sweep records first.)
    assert after[spent.ids[0]].failure is Failure.EXPIRED
    assert after[later[0].deliveries[0].id].failure is Failure.EXPIRED
