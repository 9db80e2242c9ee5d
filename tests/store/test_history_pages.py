"""M2 history pages by cursor on both backends: every filter's rows exactly once, in order,
walking older and back newer; rows published mid-walk shift nothing; totals exact up to the
bound and flagged as estimates beyond it; a cursor not from an answer is refused."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from sqlalchemy import text

import tidings
from tests.store.helpers import channel
from tidings.core.cursor import BadCursor, Cursor, decode, encode
from tidings.core.model import DeliveryQuery
from tidings.core.states import State


async def _history(hub: tidings.Hub) -> list[int]:
    """Two channels, 24 events of two kinds, half with a tenant, published in four batches;
    some rows sent, some failed, the rest pending. The delivery ids, newest first."""
    await channel(hub, "a")
    await channel(hub, "b")
    for batch in range(4):
        await hub.publish_many(
            [
                {
                    "kind": "k.one" if i % 3 else "k.two",
                    "subject": f"s{batch}-{i}",
                    "tenant": "acme" if i % 2 else None,
                }
                for i in range(6)
            ]
        )
    async with hub.store.engine.begin() as conn:
        await conn.execute(text("UPDATE deliveries SET state = 'sent' WHERE id % 3 = 0"))
        await conn.execute(
            text("UPDATE deliveries SET state = 'failed', failure = 'permanent' WHERE id % 5 = 1")
        )
    return [v.delivery.id for v in (await hub.deliveries(page_size=200)).items]


async def _queries(hub: tidings.Hub) -> dict[str, DeliveryQuery]:
    a = await hub.channels.get_by_name("a")
    rows = (await hub.deliveries(page_size=200)).items
    middle = sorted(v.delivery.created_at for v in rows)[len(rows) // 2]
    return {
        "none": DeliveryQuery(),
        "channel": DeliveryQuery(channel_id=a.id),
        "sent": DeliveryQuery(state=State.SENT),
        "failed": DeliveryQuery(state=State.FAILED),
        "pending": DeliveryQuery(state=State.PENDING),
        "kind": DeliveryQuery(event_kind="k.two"),
        "tenant": DeliveryQuery(tenant="acme"),
        "since": DeliveryQuery(since=middle),
        "until": DeliveryQuery(until=middle - timedelta(microseconds=1)),
        "channel and state": DeliveryQuery(channel_id=a.id, state=State.PENDING),
    }


async def _walk(hub: tidings.Hub, query: DeliveryQuery, size: int) -> list[list[int]]:
    """Every page from the first, following `next_cursor`."""
    page = await hub.deliveries(query, page_size=size)
    pages = [[v.delivery.id for v in page.items]]
    assert page.prev_cursor is None
    while page.next_cursor:
        page = await hub.deliveries(query, page_size=size, cursor=page.next_cursor)
        pages.append([v.delivery.id for v in page.items])
        assert page.page == len(pages)
    return pages


async def test_m2_cursor_walks_see_every_row_once_in_order_with_each_filter(
    hub: tidings.Hub,
) -> None:
    await _history(hub)
    for name, query in (await _queries(hub)).items():
        everything = [v.delivery.id for v in (await hub.deliveries(query, page_size=200)).items]
        assert everything, name  # each filter matches something, so the walk means something
        pages = await _walk(hub, query, 4)
        assert [i for p in pages for i in p] == everything, name
        assert all(len(p) == 4 for p in pages[:-1]), name
        # And back: from the last page, `prev_cursor` leads through the same pages to page 1.
        last = await hub.deliveries(query, page_size=4, page=len(pages))
        back = [[v.delivery.id for v in last.items]]
        while last.prev_cursor:
            last = await hub.deliveries(query, page_size=4, cursor=last.prev_cursor)
            back.append([v.delivery.id for v in last.items])
        assert back[::-1] == pages, name
        assert last.page == 1, name


async def test_m2_rows_published_during_a_walk_neither_repeat_nor_hide_older_rows(
    hub: tidings.Hub,
) -> None:
    before = await _history(hub)
    first = await hub.deliveries(page_size=5)
    await hub.publish_many([{"kind": "k.one", "subject": f"late{i}"} for i in range(7)])
    seen = [v.delivery.id for v in first.items]
    page = first
    while page.next_cursor:
        page = await hub.deliveries(page_size=5, cursor=page.next_cursor)
        seen.extend(v.delivery.id for v in page.items)
        await hub.publish_many([{"kind": "k.one", "subject": "later"}])
    assert seen == before
    # Walking back newer from page 1 now finds the rows published since.
    newer = await hub.deliveries(page_size=5, cursor=first.prev_cursor or _up(first))
    assert all(v.delivery.id > before[0] for v in newer.items)
    assert newer.items


def _up(page: tidings.Page[tidings.DeliveryView]) -> str:
    """The previous-page cursor above a first page (an answer gives none: nothing was newer)."""
    return encode(Cursor(after_id=page.items[0].delivery.id, older=False, page=1))


async def test_m2_totals_are_exact_up_to_the_bound_and_estimates_beyond(
    hub: tidings.Hub,
) -> None:
    ids = await _history(hub)
    exact = await hub.deliveries()
    assert (exact.total, exact.total_is_estimate) == (len(ids), False)
    hub.store.exact_total_up_to = 5
    beyond = await hub.deliveries(page_size=2)
    assert beyond.total_is_estimate
    assert beyond.total > 5
    few = await hub.deliveries(DeliveryQuery(state=State.FAILED, event_kind="k.two"))
    assert few.total <= 5
    assert not few.total_is_estimate
    assert few.total == len(few.items)
    split = await hub.deliveries(DeliveryQuery(channel_id=1))  # read along two indexes
    assert split.total_is_estimate


@pytest.mark.parametrize(
    "given",
    [
        "",
        "x",
        "not base64 at all!",
        "a" * 300,
        "é",
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(json.dumps({"v": 1, "id": 3, "o": 1}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"v": 2, "id": 3, "o": 1, "p": 1}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"v": 1, "id": -1, "o": 1, "p": 1}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"v": 1, "id": 3, "o": 2, "p": 1}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"v": 1, "id": 3, "o": 1, "p": 0}).encode()).decode(),
        base64.urlsafe_b64encode(
            json.dumps({"v": 1, "id": True, "o": 1, "p": 1}).encode()
        ).decode(),
        base64.urlsafe_b64encode(
            json.dumps({"v": 1, "id": 2**64, "o": 1, "p": 1}).encode()
        ).decode(),
    ],
)
def test_m2_a_cursor_not_made_here_is_refused(given: str) -> None:
    with pytest.raises(BadCursor) as refused:
        decode(given)
    assert refused.value.status == 400


def test_m2_a_cursor_round_trips() -> None:
    at = Cursor(after_id=2**63 - 1, older=False, page=2**31)
    assert decode(encode(at)) == at


async def test_m2_the_store_refuses_a_bad_cursor(hub: tidings.Hub) -> None:
    with pytest.raises(BadCursor):
        await hub.deliveries(cursor="bogus")
