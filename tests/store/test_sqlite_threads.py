"""SQLite runs each store operation as one transaction on a store thread: a caller cancelled
while it runs (a dispatcher stopping mid-claim) leaves nothing behind."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

import tidings
from tests.store.helpers import channel, publish, states
from tidings.core.states import State


@pytest.fixture
async def sqlite_hub(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[tidings.Hub]:
    path = tmp_path / "tidings.db"
    shutil.copy(sqlite_template, path)
    async with tidings.Hub(f"sqlite:///{path}") as hub:
        yield hub


async def test_a_claim_cancelled_while_it_runs_is_rolled_back(sqlite_hub: tidings.Hub) -> None:
    hub = sqlite_hub
    ch = await channel(hub)
    await publish(hub, 3)
    leasing = threading.Event()

    def slow_lease(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        if "prior_state" in sql:
            leasing.set()
            time.sleep(0.5)  # the caller is cancelled meanwhile

    engine = hub.store.sync_engine
    event.listen(engine, "after_cursor_execute", slow_lease)
    try:
        task = asyncio.create_task(hub.store.claim_realtime(ch.id, 10, 60.0, "w"))
        assert await asyncio.to_thread(leasing.wait, 10)  # the lease is running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        event.remove(engine, "after_cursor_execute", slow_lease)
    rows = await states(hub)
    assert [r.state for r in rows.values()] == [State.PENDING] * 3
    assert [r.attempts for r in rows.values()] == [0] * 3
    again = await hub.store.claim_realtime(ch.id, 10, 60.0, "w")
    assert again is not None
    assert len(again) == 3


async def test_store_operations_run_off_the_event_loop(sqlite_hub: tidings.Hub) -> None:
    seen: list[str] = []

    def where(*_args: Any) -> None:
        seen.append(threading.current_thread().name)

    engine = sqlite_hub.store.sync_engine
    event.listen(engine, "before_cursor_execute", where)
    try:
        await publish(sqlite_hub, 1)
    finally:
        event.remove(engine, "before_cursor_execute", where)
    assert seen
    assert all(name.startswith("tidings-db") for name in seen)


async def test_writes_take_turns_on_one_thread_and_reads_run_beside_them(
    sqlite_hub: tidings.Hub,
) -> None:
    # Writers on several threads waited for SQLite's lock in its busy handler's sleeps; on
    # one thread they queue instead. A read still answers while a write is under way.
    hub = sqlite_hub
    ch = await channel(hub)
    await publish(hub, 3)
    writers: set[str] = set()
    leasing = threading.Event()
    release = threading.Event()

    def watch(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        name = threading.current_thread().name
        statement = sql.lstrip().upper()
        # A WITH is a write only when it changes rows (the due-channel look is a WITH too).
        changes = any(verb in statement for verb in ("INSERT ", "UPDATE ", "DELETE "))
        if statement.startswith(("INSERT", "UPDATE", "DELETE", "WITH")) and changes:
            writers.add(name)
        if "prior_state" in sql and not leasing.is_set():
            leasing.set()
            release.wait(10)  # hold the write open

    engine = hub.store.sync_engine
    event.listen(engine, "before_cursor_execute", watch)
    try:
        claim = asyncio.create_task(hub.store.claim_realtime(ch.id, 10, 60.0, "w"))
        assert await asyncio.to_thread(leasing.wait, 10)
        due = await asyncio.wait_for(hub.store.due_channels(), 5)  # not queued behind it
        assert [c.id for c in due] == [ch.id]
        release.set()
        assert await claim is not None
        await asyncio.gather(*(publish(hub, 2, subject=f"more{i}") for i in range(4)))
    finally:
        release.set()
        event.remove(engine, "before_cursor_execute", watch)
    assert len(writers) == 1, writers
