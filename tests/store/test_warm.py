"""`Store.warm`: a Hub as it opens, a dispatcher as it starts, and `serve` open the
connections their first event takes and send each one's statement once, so that the first
event is as fast as the next — and change nothing: no row stored, leased or ended, no one
woken, no error where the database is missing, unreachable or not migrated yet."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text

import tidings
from tests.conftest import count, postgres
from tests.dispatch.helpers import running
from tests.store.helpers import channel, driver_connection, publish, states
from tidings.core.errors import StoreError
from tidings.core.states import State
from tidings.service import Service
from tidings.store import Store, direct
from tidings.store import store as store_module
from tidings.store.notify import NOTIFY_CHANNEL, decode_hint


async def _direct_pids(url: str) -> set[int]:
    """The server processes of the stores' own connections to this test's database. Tests
    count the ones that appeared since a first look: a connection an earlier test closed
    may still be listed for a moment."""
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetch(
            "SELECT pid FROM pg_stat_activity"
            " WHERE application_name = $1 AND datname = current_database()",
            direct.APPLICATION_NAME,
        )
    finally:
        await conn.close()
    return {int(row["pid"]) for row in found}


async def test_warm_opens_the_connections_and_changes_nothing(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as setup:
        ops = await channel(setup, "ops")
        await publish(setup, 2)  # due rows, which the warmed claim must not lease
        before = await states(setup)
    listening = await asyncpg.connect(pg_url)
    woken: asyncio.Queue[str] = asyncio.Queue()
    await listening.add_listener(NOTIFY_CHANNEL, lambda *args: woken.put_nowait(args[-1]))
    hub = tidings.Hub(pg_url)  # not opened: warmed by hand
    try:
        assert hub.store._known_channels.seen is None
        earlier = await _direct_pids(pg_url)
        await hub.store.warm(publish=True, dispatch=True)
        # The publishes', the express claims' and the delivered outcomes' connections.
        assert len(await _direct_pids(pg_url) - earlier) == 3
        assert hub.store._known_channels.seen is not None  # the channels, read
        assert await states(hub) == before
        assert [row.state for row in before.values()] == [State.PENDING] * 2
        assert await count(hub, "attempts") == 0
        assert await count(hub, "events") == 2
        # Notifications arrive in commit order: had the warm-up woken anyone, its
        # notification would come before this publish's.
        await hub.publish(kind="k", subject="s")
        first = await asyncio.wait_for(woken.get(), timeout=10)
        assert decode_hint(first) == {ops.id}
        # The warm-up sent the very statement a single publish sends: it was prepared then.
        publishes = driver_connection(hub.store._direct_publish)
        prepared = await publishes.fetch(
            "SELECT statement FROM pg_prepared_statements"
            " WHERE statement LIKE '%INSERT INTO events%' AND name <> ''"
            " AND statement NOT LIKE '%pg_prepared_statements%'"
        )
        assert len(prepared) == 1, [row["statement"][:200] for row in prepared]
    finally:
        await hub.close()
        await listening.close()


async def test_a_hub_is_warm_once_open_and_a_dispatcher_once_started(pg_url: str) -> None:
    earlier = await _direct_pids(pg_url)
    async with tidings.Hub(pg_url) as hub:
        assert len(await _direct_pids(pg_url) - earlier) == 1  # the publishes' connection
        store = Store(pg_url)
        try:
            async with running(hub, store=store) as dispatcher:
                await asyncio.wait_for(dispatcher.idle.wait(), timeout=15)
                # Its express claims' and delivered outcomes', before any event.
                assert len(await _direct_pids(pg_url) - earlier) == 3
        finally:
            await store.close()


async def test_warm_on_a_database_not_migrated_is_quiet_and_creates_nothing() -> None:
    server = postgres()
    name = server.create_database()
    try:
        url = server.url(name)
        async with tidings.Hub(url) as hub:
            await hub.store.warm(publish=True, dispatch=True)
            async with hub.store.engine.connect() as conn:
                tables = await conn.execute(
                    text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
                )
                assert tables.scalar_one() == 0
            # The first real statement says what is wrong, as it did before.
            with pytest.raises(StoreError):
                await hub.publish(kind="k", subject="s")
    finally:
        server.drop_database(name)


async def test_warm_where_no_database_answers_returns_and_the_publish_says_why(
    unused_tcp_port: int,
) -> None:
    url = f"postgresql://postgres@127.0.0.1:{unused_tcp_port}/tidings"
    async with tidings.Hub(url) as hub:
        await hub.store.warm(publish=True, dispatch=True)
        with pytest.raises(StoreError, match="database error"):
            await hub.publish(kind="k", subject="s")


async def test_a_hub_opened_on_a_missing_sqlite_file_does_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    async with tidings.Hub(f"sqlite:///{path}") as hub:
        await hub.store.warm(publish=True, dispatch=True)
    assert not path.exists()


async def test_the_server_warms_its_token_check_and_publish_and_changes_nothing(
    pg_url: str,
) -> None:
    hub = tidings.Hub(pg_url)  # as `serve` makes it: not opened with `async with`
    try:
        earlier = await _direct_pids(pg_url)
        await Service(hub).warm()
        assert len(await _direct_pids(pg_url) - earlier) == 1  # the publishes' connection
        assert hub.store._known_channels.seen is not None
        assert [await count(hub, t) for t in ("api_tokens", "events", "channels")] == [0, 0, 0]
    finally:
        await hub.close()


async def test_the_server_warming_where_no_database_answers_returns(unused_tcp_port: int) -> None:
    hub = tidings.Hub(f"postgresql://postgres@127.0.0.1:{unused_tcp_port}/tidings")
    try:
        await Service(hub).warm()
    finally:
        await hub.close()


def test_a_sync_hub_is_warm_once_entered(pg_url: str) -> None:
    earlier = asyncio.run(_direct_pids(pg_url))
    with tidings.SyncHub(pg_url):
        opened = asyncio.run(_direct_pids(pg_url)) - earlier
    assert len(opened) == 1  # the publishes' connection


async def test_warm_gives_up_on_a_database_that_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that takes the connection and says nothing (a hung host) holds up a Hub's
    opening for WARM_WITHIN_S at most, not for the driver's own timeouts."""
    monkeypatch.setattr(store_module, "WARM_WITHIN_S", 0.3)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes the handshakes; nothing ever answers
        port = silent.getsockname()[1]
        started = time.monotonic()
        hub = tidings.Hub(f"postgresql://postgres@127.0.0.1:{port}/tidings")
        try:
            await hub.store.warm(publish=True, dispatch=True)
        finally:
            await hub.close()
        assert time.monotonic() - started < 5
