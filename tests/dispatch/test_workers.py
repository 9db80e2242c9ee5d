"""Crashes, signals and clusters with real worker processes (C2, C3, C6, W1, W3)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import psycopg
import pytest

import tidings
from tests.dispatch.helpers import eventually, settled, webhook
from tests.dispatch.workers import spawn, workers
from tests.sink import Answer, Sink
from tidings.core.states import AttemptStatus, State
from tidings.store.engine import PING_AFTER_IDLE_S

LEASE_S = 3.0  # as the workers are started; channels use timeout_s 0.7 (C5: 4 × 0.7 ≤ 3)


async def test_c2_kill_9_mid_send_is_delivered_by_another_worker_after_the_lease(
    hub: tidings.Hub, sink: Sink, db_url: str, tmp_path: Path
) -> None:
    sink.script("/hook", Answer(200, hang=True))
    await webhook(hub, sink.url("/hook"), timeout_s=0.7)
    await hub.publish(kind="monitor.down", subject="m:1")
    with workers(tmp_path, db_url, "doomed") as (doomed,):
        await sink.await_for(1, "/hook")
        doomed.signal(signal.SIGKILL)
        doomed.wait(10)
    sink.release()
    started = time.monotonic()
    with workers(tmp_path, db_url, "rescuer"):
        (row,) = await settled(hub, 1, timeout_s=20)
    # The lost lease is audited under the worker that held it, and is not an attempt.
    assert (row.state, row.attempts, row.lost_leases) == (State.SENT, 1, 1)
    assert row.lease_owner == "rescuer"
    assert sink.count("/hook") == 2
    assert time.monotonic() - started < LEASE_S + 10
    log = (await hub.delivery(row.id)).attempts_log
    assert [(a.worker_id, a.status) for a in log] == [
        ("doomed", AttemptStatus.LEASE_LOST),
        ("rescuer", AttemptStatus.DELIVERED),
    ]


async def test_c3_a_stopped_worker_resumed_after_reclaim_changes_nothing(
    hub: tidings.Hub, sink: Sink, db_url: str, tmp_path: Path
) -> None:
    sink.script("/hook", Answer(500, "first try", hang=True))
    await webhook(hub, sink.url("/hook"), timeout_s=0.7)
    await hub.publish(kind="monitor.down", subject="m:1")
    # Without retention, a worker whose send is out writes nothing until its answer comes:
    # frozen in the middle of a retention batch, it would hold SQLite's write lock, and the
    # fresh worker could not start (a busy machine made that happen).
    with workers(tmp_path, db_url, "sleepy", retention_days=0) as (sleepy,):
        await sink.await_for(1, "/hook")
        sleepy.signal(signal.SIGSTOP)
        await asyncio.sleep(LEASE_S + 0.5)  # its lease runs out while it is frozen
        with workers(tmp_path, db_url, "fresh"):
            (row,) = await settled(hub, 1, timeout_s=20)
        assert (row.state, row.lease_owner, row.attempts) == (State.SENT, "fresh", 1)
        assert row.lost_leases == 1
        sleepy.signal(signal.SIGCONT)
        sink.release()  # the frozen worker now gets its (late) answer and reports it
        await eventually(
            _has(sleepy.output, "fenced 1 stale write"), timeout_s=10, what="the fenced write"
        )
    (after,) = (await hub.deliveries()).items
    assert after.delivery.state is State.SENT
    assert after.delivery.lease_owner == "fresh"
    assert after.delivery.last_error is None


def _has(read: Callable[[], str], text: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return text in read()

    return check


async def test_w3_sigterm_during_sends_exits_zero_and_leaves_no_row_sending(
    hub: tidings.Hub, sink: Sink, db_url: str, tmp_path: Path
) -> None:
    sink.default("/hook", Answer(200, hang=True))
    await webhook(hub, sink.url("/hook"), timeout_s=0.7)
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(5)])
    worker = spawn(tmp_path, db_url, "terminated", lease_s=30, timeout_s=None)
    try:
        await sink.await_for(5, "/hook")
        started = time.monotonic()
        worker.signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 30)
        assert code == 0, worker.output()
        assert time.monotonic() - started < 10
    finally:
        worker.stop()
        sink.release()
    page = await hub.deliveries()
    states = {v.delivery.state for v in page.items}
    assert State.SENDING not in states


@pytest.fixture
async def pg_hub(pg_url: str) -> AsyncIterator[tidings.Hub]:
    """Cluster behaviour: several dispatchers on one PostgreSQL (W1)."""
    async with tidings.Hub(pg_url) as hub:
        yield hub


async def test_c6_rate_limit_holds_across_two_worker_processes(
    pg_hub: tidings.Hub, sink: Sink, pg_url: str, tmp_path: Path
) -> None:
    hub, db_url = pg_hub, pg_url
    rate_per_min = 120  # one every 0.5 s, burst 1
    await webhook(hub, sink.url("/hook"), rate_per_min=rate_per_min, timeout_s=0.7)
    count = 8
    with workers(tmp_path, db_url, "w1", "w2"):
        await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(count)])
        rows = await settled(hub, count, timeout_s=30)
    arrivals = sorted(r.at for r in sink.requests("/hook"))
    assert len(arrivals) == count
    # The bucket admits claims; arrivals add the transport's jitter on a busy 2-core machine.
    jitter_s = 0.1
    for i in range(len(arrivals)):
        for j in range(i + 1, len(arrivals)):
            window = arrivals[j] - arrivals[i] + jitter_s
            assert j - i + 1 <= 1 + rate_per_min * window / 60.0, (i, j, window)
    assert {r.attempts for r in rows} == {1}  # waiting for budget spent no attempt
    assert {r.lease_owner for r in rows} <= {"w1", "w2"}


async def test_w1_three_workers_drain_5000_and_each_message_arrives_once(
    pg_hub: tidings.Hub, sink: Sink, pg_url: str, tmp_path: Path
) -> None:
    hub, db_url = pg_hub, pg_url
    total = 5000
    await webhook(hub, sink.url("/hook"), timeout_s=2.0)
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(total)])
    with workers(tmp_path, db_url, "a", "b", "c", lease_s=10):
        await eventually(
            lambda: _count_state(hub, State.SENT, total), timeout_s=120, what="all sent"
        )
    ids = [r.headers["webhook-id"] for r in sink.requests("/hook")]
    assert len(ids) == total
    assert len(set(ids)) == total
    page = await hub.deliveries(page_size=200)
    assert page.total == total


async def _count_state(hub: tidings.Hub, state: State, expected: int) -> bool:
    page = await hub.deliveries(tidings.DeliveryQuery(state=state), page_size=1)
    return page.total >= expected


def test_worker_refuses_a_short_lease_with_one_line(tmp_path: Path, db_url: str) -> None:
    env = dict(os.environ, TIDINGS_DB=db_url, TIDINGS_LEASE_S="10")

    async def make_channel() -> None:
        # Saved under a long lease; the worker below runs with a 10 s one.
        async with tidings.Hub(db_url, lease_s=300) as hub:
            await hub.channels.create(name="slow", kind="inbox", timeout_s=60)

    asyncio.run(make_channel())
    done = subprocess.run(
        [sys.executable, "-m", "tidings", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "lease of 10 s" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


async def test_w2_a_publish_by_another_process_wakes_an_idle_worker_on_postgres(
    pg_hub: tidings.Hub, sink: Sink, pg_url: str, tmp_path: Path
) -> None:
    await webhook(pg_hub, sink.url("/hook"), timeout_s=0.7)
    # A worker reports "started" once it listens; with nothing due it then sleeps on its poll.
    with workers(tmp_path, pg_url, "idle", poll_interval_s=10):
        for i in range(3):
            sent_at = time.monotonic()
            await pg_hub.publish(kind="a.b", subject=f"s{i}")
            (got,) = (await sink.await_for(i + 1, "/hook", timeout_s=3))[i : i + 1]
            assert got.at - sent_at < 1.0  # LISTEN/NOTIFY, not the poll


async def test_a_worker_outlives_its_database_connections_being_killed(
    pg_url: str, sink: Sink, tmp_path: Path
) -> None:
    """A database restart drops every connection. The worker meets dead ones on its next
    polls (they fail once and the pool is dropped) and keeps going instead of exiting; a
    connection that sat idle past PING_AFTER_IDLE_S is checked before use."""
    async with tidings.Hub(pg_url) as hub:
        await webhook(hub, sink.url("/hook"), timeout_s=0.7)
        await hub.publish(kind="monitor.down", subject="m:1")
        with workers(tmp_path, pg_url, "steady", poll_interval_s=0.2) as (steady,):
            await settled(hub, 1)
            with psycopg.connect(pg_url, autocommit=True) as admin:
                row = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
            assert row is not None
            assert row[0] >= 2  # the worker's pool and LISTEN connections, the hub's
            await asyncio.sleep(PING_AFTER_IDLE_S + 0.5)
            assert steady.process.poll() is None, steady.output()
            await hub.publish(kind="monitor.down", subject="m:2")  # idle: pinged, reconnected
            rows = await settled(hub, 2, timeout_s=20)
            assert steady.process.poll() is None, steady.output()
            assert "retrying" in steady.output()
    assert [r.state for r in rows] == [State.SENT, State.SENT]
    assert sink.count("/hook") == 2
