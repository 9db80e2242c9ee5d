"""M2 time filters on both backends read only the ids near their time: a binary search over
the primary key finds where the rows stamped after `until` (plus `STORED_WITHIN`) begin and
where those before `since` (minus it) end. What they answer is what a scan of every row
answers, also for a row stamped out of order within `STORED_WITHIN`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import bindparam, text, update

import tidings
from tests.store.helpers import channel, publish
from tidings.core.model import DeliveryQuery
from tidings.store import history
from tidings.store.schema import deliveries

HOUR = timedelta(hours=1)
START = datetime(2026, 1, 1, tzinfo=UTC)
#: The row stamped out of order: half an hour before the row ahead of it (by id).
LATE = 30


async def _hourly(hub: tidings.Hub, count: int = 60) -> dict[int, datetime]:
    """`count` deliveries stamped an hour apart in id order, but the LATE-th one stamped
    half an hour before the one ahead of it. Their ids and times."""
    await channel(hub, "ops")
    await publish(hub, count)
    async with hub.store.engine.begin() as conn:
        ids = [r[0] for r in await conn.execute(text("SELECT id FROM deliveries ORDER BY id"))]
        stamps = {i: START + n * HOUR for n, i in enumerate(ids)}
        stamps[ids[LATE]] = stamps[ids[LATE - 1]] - HOUR / 2
        await conn.execute(
            update(deliveries)
            .where(deliveries.c.id == bindparam("key"))
            .values(created_at=bindparam("stamp")),
            [{"key": i, "stamp": s} for i, s in stamps.items()],
        )
    return stamps


async def _listed(hub: tidings.Hub, query: DeliveryQuery) -> list[int]:
    page = await hub.deliveries(query, page_size=7)
    seen = [v.delivery.id for v in page.items]
    while page.next_cursor:
        page = await hub.deliveries(query, page_size=7, cursor=page.next_cursor)
        seen.extend(v.delivery.id for v in page.items)
    return seen


async def test_m2_time_filters_answer_what_a_full_scan_answers(hub: tidings.Hub) -> None:
    stamps = await _hourly(hub)
    ids = sorted(stamps)
    moments = [START - HOUR, START, *(stamps[ids[n]] for n in (LATE - 1, LATE, LATE + 1))]
    moments += [stamps[ids[LATE]] + HOUR / 4, stamps[ids[-1]], stamps[ids[-1]] + HOUR]
    # The calendar's ends: no window can be had beyond them, and none is needed.
    moments += [datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)]
    for moment in moments:
        until = sorted((i for i, s in stamps.items() if s <= moment), reverse=True)
        since = sorted((i for i, s in stamps.items() if s >= moment), reverse=True)
        assert await _listed(hub, DeliveryQuery(until=moment)) == until, moment
        assert await _listed(hub, DeliveryQuery(since=moment)) == since, moment
        if moment - datetime.min.replace(tzinfo=UTC) > 5 * HOUR:
            both = DeliveryQuery(since=moment - 5 * HOUR, until=moment)
            within = [i for i in until if stamps[i] >= moment - 5 * HOUR]
            assert await _listed(hub, both) == within, moment
        page = await hub.deliveries(DeliveryQuery(until=moment), page_size=7)
        assert (page.total, page.total_is_estimate) == (len(until), False)


async def test_m2_a_time_filter_reads_only_ids_within_stored_within_of_its_time(
    hub: tidings.Hub,
) -> None:
    stamps = await _hourly(hub)
    ids = sorted(stamps)
    assert history.STORED_WITHIN == HOUR  # the expectations below count in hours
    async with hub.store.engine.connect() as conn:

        async def after(moment: datetime) -> int | None:
            return await conn.run_sync(
                lambda c: history._first_id_stamped_after(c, moment + history.STORED_WITHIN)
            )

        async def before(moment: datetime) -> int | None:
            return await conn.run_sync(
                lambda c: history._last_id_stamped_before(c, moment - history.STORED_WITHIN)
            )

        # Until row 10's time: rows from the first stamped more than an hour later (row 12)
        # on are newer; rows 11 and 12... are read and filtered by time.
        assert await after(stamps[ids[10]]) == ids[12]
        assert await before(stamps[ids[10]]) == ids[8]
        assert await after(stamps[ids[-1]]) is None
        assert await before(stamps[ids[0]]) is None
        assert await after(START - 10 * HOUR) == ids[0]
        assert await before(stamps[ids[-1]] + 10 * HOUR) == ids[-1]
        # Around the row stamped out of order, the search still lands within two hours.
        found = await after(stamps[ids[LATE - 1]])
        assert found is not None
        assert ids[LATE] < found <= ids[LATE + 2]
