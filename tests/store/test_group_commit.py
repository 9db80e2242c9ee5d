"""Group commit (E1, E2): single publishes made at the same moment share one transaction, and
each is answered with its own result or its own error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

import tidings
from tests.conftest import count
from tests.faults import DIE, POISON, faults
from tests.store.helpers import channel
from tidings.core.errors import Conflict, StoreError
from tidings.store import direct

EVENT = {"kind": "monitor.down", "subject": "web-1", "severity": "high"}


@contextmanager
def commits(hub: tidings.Hub) -> Iterator[list[int]]:
    """Counts the transactions the store commits inside the block: through its engine, and
    the statements it sends on its own driver connections, each its own transaction."""
    seen: list[int] = []

    def committed(_conn: object) -> None:
        seen.append(1)

    original = direct.Direct.fetch

    async def fetch(self: direct.Direct, statement: Any, params: Any) -> Any:
        rows = await original(self, statement, params)
        seen.append(1)
        return rows

    engine = hub.store.sync_engine
    event.listen(engine, "commit", committed)
    direct.Direct.fetch = fetch  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        direct.Direct.fetch = original  # type: ignore[method-assign]
        event.remove(engine, "commit", committed)


async def _channels(hub: tidings.Hub) -> None:
    for name in ("a", "b", "c"):
        await channel(hub, name)


async def test_e1_publishes_made_together_share_one_transaction(hub: tidings.Hub) -> None:
    await _channels(hub)
    with commits(hub) as seen:
        results = await asyncio.gather(*(hub.publish(**EVENT, title=f"t{i}") for i in range(50)))
    assert len(seen) == 1
    assert all(r.created and len(r.deliveries) == 3 for r in results)
    assert [r.event.title for r in results] == [f"t{i}" for i in range(50)]
    assert len({r.event.id for r in results}) == 50
    assert (await count(hub, "events"), await count(hub, "deliveries")) == (50, 150)


async def test_e1_publishes_arriving_during_a_commit_go_in_the_next_group(
    hub: tidings.Hub,
) -> None:
    await _channels(hub)
    first = asyncio.ensure_future(hub.publish(**EVENT, title="first"))
    await asyncio.sleep(0)  # the first group is taken
    later = [asyncio.ensure_future(hub.publish(**EVENT, title=f"t{i}")) for i in range(10)]
    with commits(hub) as seen:
        await asyncio.gather(first, *later)
    assert len(seen) == 2
    assert await count(hub, "events") == 11


async def test_e2_keys_repeated_in_one_group_and_across_groups(hub: tidings.Hub) -> None:
    await _channels(hub)
    keys = ["a", "a", None, "b", "a"]
    first = await asyncio.gather(*(hub.publish(**EVENT, idempotency_key=k) for k in keys))
    assert [r.created for r in first] == [True, False, True, True, False]
    assert first[1].event == first[0].event == first[4].event
    assert [d.id for d in first[1].deliveries] == [d.id for d in first[0].deliveries]
    again = await asyncio.gather(*(hub.publish(**EVENT, idempotency_key=k) for k in "abc"))
    assert [r.created for r in again] == [False, False, True]
    assert again[0].event.id == first[0].event.id
    assert again[1].event.id == first[3].event.id
    assert (await count(hub, "events"), await count(hub, "deliveries")) == (4, 12)


async def test_e1_an_event_the_database_refuses_fails_alone_in_its_group(
    hub: tidings.Hub,
) -> None:
    await _channels(hub)
    titles = [f"t{i}" for i in range(9)]
    titles.insert(4, POISON)
    async with faults(hub):
        with commits(hub) as seen:
            answers = await asyncio.gather(
                *(hub.publish(**EVENT, title=t) for t in titles), return_exceptions=True
            )
    assert isinstance(answers[4], Conflict)
    stored = [a for a in answers if isinstance(a, tidings.PublishResult)]
    assert [r.event.title for r in stored] == titles[:4] + titles[5:]
    assert len(seen) == 9  # the group rolled back, then each event alone
    assert (await count(hub, "events"), await count(hub, "deliveries")) == (9, 27)


async def test_e1_a_database_failure_fails_the_whole_group_and_stores_nothing(
    hub: tidings.Hub,
) -> None:
    await _channels(hub)
    titles = [f"t{i}" for i in range(9)]
    titles.insert(4, DIE)
    async with faults(hub, die=True):
        answers = await asyncio.gather(
            *(hub.publish(**EVENT, title=t) for t in titles), return_exceptions=True
        )
    assert all(isinstance(a, StoreError) for a in answers), answers
    assert (await count(hub, "events"), await count(hub, "deliveries")) == (0, 0)
    result = await hub.publish(**EVENT, title="after")  # the store recovers
    assert result.created
    assert await count(hub, "events") == 1


async def test_a_caller_cancelled_before_its_group_starts_publishes_nothing(
    hub: tidings.Hub,
) -> None:
    await _channels(hub)
    first = asyncio.ensure_future(hub.publish(**EVENT, title="first"))
    await asyncio.sleep(0)
    withdrawn = asyncio.ensure_future(hub.publish(**EVENT, title="withdrawn"))
    await asyncio.sleep(0)  # queued behind the running group
    withdrawn.cancel()
    await first
    with pytest.raises(asyncio.CancelledError):
        await withdrawn
    await hub.publish(**EVENT, title="last")
    assert await count(hub, "events") == 2


@pytest.mark.postgres_only
async def test_e2_concurrent_groups_with_the_same_keys_never_deadlock(pg_url: str) -> None:
    """Two transactions inserting the same keys in opposite orders would each wait for the
    other; keys are inserted in sorted order, so one waits and then answers 200."""
    async with tidings.Hub(pg_url) as hub:
        await _channels(hub)
        for round_ in range(20):
            keys = [f"r{round_}-k{i:02}" for i in range(40)]
            groups = [
                [dict(EVENT, idempotency_key=k) for k in order] for order in (keys, keys[::-1])
            ]
            answers = await asyncio.gather(*(hub.publish_many(g) for g in groups))
            firsts = [r.created for r in answers[0]], [r.created for r in answers[1][::-1]]
            assert [a or b for a, b in zip(*firsts, strict=True)] == [True] * len(keys)
        assert await count(hub, "events") == 20 * 40
