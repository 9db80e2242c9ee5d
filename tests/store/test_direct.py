"""The store's own driver connections (PostgreSQL): the gathered express claims and delivered
outcomes go on them, bypassing the engine. A connection the server dropped is replaced, the
driver's errors come back as tidings errors, and a caller on another event loop takes the
engine as before."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import asyncpg as postgres_asyncpg

import tidings
from tests.conftest import count
from tests.faults import DIE, POISON, faults
from tests.store.helpers import LEASE_S, WORKER, channel, publish, statements_sent, states
from tidings.core.errors import Conflict, StoreError
from tidings.core.states import State
from tidings.store import direct, express
from tidings.store.url import parse


async def _on_direct_connections(hub: tidings.Hub, column: str) -> list[Any]:
    """`column` of pg_stat_activity for each of the store's own connections to this test's
    database (`pg_terminate_backend(pid)` drops them)."""
    async with hub.store.engine.connect() as conn:
        found = await conn.execute(
            text(
                f"SELECT {column} FROM pg_stat_activity"
                " WHERE application_name = :name AND datname = current_database()"
            ),
            {"name": direct.APPLICATION_NAME},
        )
        return [value for (value,) in found]


async def _drop_direct_connections(hub: tidings.Hub) -> int:
    return len(await _on_direct_connections(hub, "pg_terminate_backend(pid)"))


async def test_c1_a_direct_connection_the_server_dropped_is_replaced(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 3)
        with statements_sent(hub) as seen:
            first = await hub.store.claim_express(ch, 1, LEASE_S, WORKER)
        assert first is not None
        assert len(seen) == 1  # the claim, on the store's own connection
        # The claim's connection, and the publishes' one (opened with the hub).
        assert await _drop_direct_connections(hub) == 2
        # The dropped connection fails at most the one statement that finds it gone, as a
        # tidings error; the next opens a new connection.
        failures = 0
        claimed = []
        for _ in range(2):
            try:
                got = await hub.store.claim_express(ch, 1, LEASE_S, WORKER)
            except StoreError:
                failures += 1
                continue
            assert got is not None
            claimed.append(got)
        assert failures <= 1
        assert claimed
        leased = {r.id for r in (await states(hub)).values() if r.state is State.SENDING}
        assert leased == {i for c in (first, *claimed) for i in c.ids}
        # Delivered outcomes go on a connection of their own, and work too.
        for c in (first, *claimed):
            assert await hub.store.mark_sent(c.token, c.ids) == 1


async def test_a_failed_statement_is_a_store_error_and_the_connection_stays(pg_url: str) -> None:
    line = direct.Direct(parse(pg_url), postgres_asyncpg.dialect())
    try:
        backend = text("SELECT pg_backend_pid()")
        (before,) = await line.fetch(backend, {})
        with pytest.raises(StoreError, match="division by zero"):
            await line.fetch(text("SELECT 1 / 0"), {})
        (after,) = await line.fetch(backend, {})
        assert after[0] == before[0]  # the statement failed, not the connection
    finally:
        await line.close()


def test_a_direct_connection_serves_only_the_event_loop_that_opened_it(pg_url: str) -> None:
    line = direct.Direct(parse(pg_url), postgres_asyncpg.dialect())

    async def use() -> bool:
        serves = line.serves()
        try:
            await line.fetch(text("SELECT 1"), {})
        finally:
            await line.close()
        return serves

    async def ask() -> bool:
        return line.serves()

    assert asyncio.run(use())
    assert not asyncio.run(ask())  # another loop: the store takes its engine


async def test_c1_the_engine_path_of_gathered_claims_leases_as_the_direct_one(
    pg_url: str,
) -> None:
    # A group the direct connection cannot take (another loop) goes through the engine.
    async with tidings.Hub(pg_url) as hub:
        chs = [await channel(hub, f"c{i}") for i in range(3)]
        await publish(hub, 2)
        asks = [express.Ask(ch, 1, LEASE_S, WORKER) for ch in chs]
        by_engine = await hub.store._run(express.claim_many, asks, one_statement=True)
        assert [c.channel.id if c else None for c in by_engine] == [ch.id for ch in chs]
        line = direct.Direct(parse(pg_url), hub.store.engine.dialect)
        try:
            by_direct = await express.claim_many_direct(line, asks, _no_reload)
        finally:
            await line.close()
        assert [c.channel.id if c else None for c in by_direct] == [ch.id for ch in chs]
        rows = await states(hub)
        for claim in (*by_engine, *by_direct):
            assert claim is not None
            assert len(claim.ids) == 1
            assert all(rows[i].lease_token == claim.token for i in claim.ids)
            assert claim.items[0].event.id == rows[claim.ids[0]].event_id


async def _no_reload(ids: list[int]) -> dict[int, None]:
    raise AssertionError(f"no channel changed, yet {ids} were read again")


EVENT = {"kind": "monitor.down", "subject": "web-1", "severity": "high"}


@contextlib.contextmanager
def _direct_statements() -> Iterator[list[str]]:
    """The SQL of every statement sent on a store's own driver connections meanwhile."""
    sent: list[str] = []
    original = direct.Direct.fetch

    async def fetch(self: direct.Direct, statement: Any, params: Any) -> Any:
        sent.append(direct.compiled(statement, self._dialect).sql)
        return await original(self, statement, params)

    direct.Direct.fetch = fetch  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        direct.Direct.fetch = original  # type: ignore[method-assign]


async def test_e1_e2_single_publishes_go_direct_once_the_channels_are_known(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        await channel(hub, "a")
        await channel(hub, "b")
        # Changed by this hub since it opened: the first publish reads them again, through
        # the engine (and publishes there).
        with _direct_statements() as sent:
            first = await hub.publish(**EVENT, idempotency_key="k1")
        assert len(first.deliveries) == 2
        assert sent == []
        with _direct_statements() as sent, statements_sent(hub) as seen:
            second = await hub.publish(**EVENT, title="second")
        (query,) = sent  # one statement, on the store's own connection: the publish
        assert "INSERT INTO events" in query
        assert "pg_notify" in query
        assert len(seen) == 1
        assert second.created
        assert len(second.deliveries) == 2
        # E2 on the direct path: the key's first event, read after the statement.
        again = await hub.publish(**EVENT, title="again", idempotency_key="k1")
        assert not again.created
        assert again.event == first.event
        assert again.deliveries == first.deliveries
        assert (await count(hub, "events"), await count(hub, "deliveries")) == (2, 4)
        stored = await hub.get_event(second.event.id)
        assert stored.event == second.event
        assert stored.deliveries == second.deliveries


async def test_e1_a_stale_plan_on_the_direct_path_stores_nothing_and_goes_again(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as other:
        await channel(hub, "a")
        await hub.publish(**EVENT)  # the channels are known from here
        await channel(other, "b")  # changed by another process
        result = await hub.publish(**EVENT, title="after")
        assert {d.channel_id for d in result.deliveries} == {
            c.id for c in await hub.channels.list()
        }
        assert (await count(hub, "events"), await count(hub, "deliveries")) == (2, 3)


async def test_e1_an_event_the_database_refuses_on_the_direct_path_fails_alone(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub:
        answers = await _direct_group(hub, ["t0", "t1", POISON, "t2"])
        assert isinstance(answers[2], Conflict)
        stored = [a.event.title for a in answers if isinstance(a, tidings.PublishResult)]
        assert stored == ["t0", "t1", "t2"]
        # Refused on the direct connection, the group stored nothing there: no event twice.
        assert (await count(hub, "events"), await count(hub, "deliveries")) == (4, 4)


async def test_e1_a_session_killed_under_a_direct_publish_fails_the_group_and_stores_nothing(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub:
        answers = await _direct_group(hub, ["t0", DIE, "t1"], die=True)
        assert all(isinstance(a, StoreError) for a in answers), answers
        assert await count(hub, "events") == 1
        after = await hub.publish(**EVENT, title="after")  # a new connection
        assert after.created
        assert await count(hub, "events") == 2


async def _direct_group(hub: tidings.Hub, titles: list[str], *, die: bool = False) -> list[Any]:
    """A group of publishes, one per title, made once the channels are known (so it goes on
    the direct connection), with the database's faults on (`tests.faults`)."""
    await channel(hub, "a")
    await hub.publish(**EVENT)
    async with faults(hub, die=die):
        return await asyncio.gather(
            *(hub.publish(**EVENT, title=t) for t in titles), return_exceptions=True
        )
