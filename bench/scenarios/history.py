"""The history scenario: history pages (first and ten-thousandth, each single filter), the
dashboard and a delivery's detail on bulk-built tables (PostgreSQL and SQLite), read through
the store calls the API makes; p95 of each. Then WAL bytes per delivered message with the
indexes before migration 0014 and after it (bench/wal.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import history_build, wal
from bench.result import Result
from bench.rig import Rig

PAGE_SIZE = 50
DEEP_PAGE = 10_000
KEPT_DATABASE = "tidings_history_bench"
#: The kept database's secret key file: its channels' secrets are sealed with it.
KEPT_KEY_FILE = Path.home() / ".cache" / "tidings-bench" / "history.key"
TARGET_MS = {"postgresql": 50.0, "sqlite": 100.0}
Probe = Callable[[], Awaitable[object]]


def _cases(end: datetime) -> dict[str, dict[str, Any]]:
    """Each single filter the history takes, with a value that matches many rows."""
    return {
        "none": {},
        "channel (busy, 1/20 of rows)": {"channel_id": 3},
        "channel (quiet, 1/180 of rows)": {"channel_id": 42},
        "state sent": {"state": "sent"},
        "state failed": {"state": "failed"},
        "state skipped": {"state": "skipped"},
        "state pending": {"state": "pending"},
        "kind": {"event_kind": "kind.3"},
        "kind (rare)": {"event_kind": "rare.alert"},
        "tenant": {"tenant": "tenant-4"},
        "since 30 days": {"since": end - timedelta(days=30)},
        "until 7 days ago": {"until": end - timedelta(days=7)},
    }


async def _p95_ms(probe: Probe, reps: int) -> float:
    await probe()  # warm: the first read of a cold page is not what a user waits on twice
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        await probe()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


async def measure(url: str, end: datetime, reps: int) -> dict[str, Any]:
    """p95 (ms) of every history case, first and deep page, the dashboard and the detail."""
    import tidings
    from tidings.core.model import DeliveryQuery
    from tidings.core.states import State

    found: dict[str, Any] = {"pages": {}, "depths": {}}
    async with tidings.Hub(url) as hub:
        store = hub.store
        for name, fields in _cases(end).items():
            if "state" in fields:
                fields = {**fields, "state": State(fields["state"])}
            query = DeliveryQuery(**fields)
            first = await store.list_deliveries(query, None, PAGE_SIZE)
            pages = max(1, -(-first.total // PAGE_SIZE))
            depth = min(DEEP_PAGE, pages)
            found["depths"][name] = {"pages": pages, "estimated": first.total_is_estimate}
            found["pages"][f"{name}, page 1"] = await _p95_ms(
                lambda q=query: store.list_deliveries(q, None, PAGE_SIZE), reps
            )
            if depth < 2:
                continue
            # The cursor a reader walking there would hold, made once through OFFSET (a
            # little less deep when the estimated total was more than there is).
            cursor = None
            while depth >= 2 and cursor is None:
                before = await store.list_deliveries(query, depth - 1, PAGE_SIZE)
                cursor = before.next_cursor
                depth = depth if cursor else depth * 9 // 10
            if cursor is None:
                continue
            found["depths"][name]["deep"] = depth
            found["pages"][f"{name}, page {depth}"] = await _p95_ms(
                lambda q=query, c=cursor: store.list_deliveries(q, None, PAGE_SIZE, c), reps
            )

        async def dashboard() -> None:  # what Service.dashboard reads
            await store.state_counts()
            await store.hourly_attempts(24, now=end)
            await store.oldest_pending()
            await store.list_channels()

        found["dashboard"] = await _p95_ms(dashboard, reps)
        newest = (await store.list_deliveries(None, None, 1)).items[0].delivery.id
        ids = random.Random(7).sample(range(1, newest + 1), min(newest, reps + 1))
        it = iter(ids)
        found["detail"] = await _p95_ms(lambda: store.get_delivery(next(it)), reps)
    return found


def _results(backend: str, rows: int, found: dict[str, Any], notes: dict[str, Any]) -> list[Result]:
    pages: dict[str, float] = found["pages"]
    worst = max(pages, key=lambda k: pages[k])
    over = {k: round(v, 1) for k, v in pages.items() if v >= TARGET_MS[backend]}
    common = {"deliveries": rows, "page_size": PAGE_SIZE, **notes}
    return [
        Result(
            f"history/{backend}-page-p95",
            pages[worst],
            "ms (worst case)",
            backend,
            notes={
                **common,
                "worst": worst,
                "target_ms": TARGET_MS[backend],
                "over_target": over,
                "p95_ms": {k: round(v, 2) for k, v in pages.items()},
                "depths": found["depths"],
            },
        ),
        Result(f"history/{backend}-dashboard-p95", found["dashboard"], "ms", backend, notes=common),
        Result(f"history/{backend}-detail-p95", found["detail"], "ms", backend, notes=common),
    ]


def _pg_data(rig: Rig, rows: int) -> tuple[str, datetime, dict[str, Any]]:
    """The bulk-built database (kept between runs with --keep-history-data): its URL, the
    instant its data ends, and how it was had."""
    server = rig.pg.server
    name = KEPT_DATABASE if rig.keep_history else server.create_database("tidings_history")
    if not rig.keep_history:
        rig.pg.created.append(name)
    url = server.url(name)
    with server.admin() as admin:
        admin.autocommit = True
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (name,),
        ).fetchone()
        kept = json.loads(row[0]) if row and row[0] else {}
        same = kept == {**kept, "deliveries": rows, "schema": _head()}
        if rig.keep_history and same and KEPT_KEY_FILE.exists():
            return url, datetime.fromisoformat(kept["ends_at"]), {"built": "kept from a run"}
        if rig.keep_history:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
            from tidings.store.keys import create_key_file

            KEPT_KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
            KEPT_KEY_FILE.unlink(missing_ok=True)
            create_key_file(KEPT_KEY_FILE)
    t = time.monotonic()
    asyncio.run(_migrate_with_channels(url))
    with rig.pg.connect(name) as conn:
        end = history_build.build_pg(conn, rows)
        meta = json.dumps({"deliveries": rows, "ends_at": end.isoformat(), "schema": _head()})
        conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{meta}'")
    return url, end, {"built_s": round(time.monotonic() - t, 1)}


@contextlib.contextmanager
def _secret_key_file(path: Path | None) -> Iterator[None]:
    """With `path`, the kept database's own key file instead of the run's key (whose
    environment variable would win over any file), for as long as the block runs."""
    names = ("TIDINGS_SECRET_KEY", "TIDINGS_SECRET_KEY_FILE")
    saved = {name: os.environ.get(name) for name in names}
    if path is not None:
        os.environ.pop(names[0], None)
        os.environ[names[1]] = str(path)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _head() -> str:
    from tidings.store import migrate

    return migrate.head()


async def _migrate_with_channels(url: str) -> None:
    from bench import workload

    specs = [
        workload.webhook(f"hook-{i}", "http://127.0.0.1:9/hook")
        for i in range(1, history_build.CHANNELS + 1)
    ]
    await workload.setup(url, specs)


def _sqlite_data(rig: Rig, rows: int) -> tuple[str, datetime, dict[str, Any]]:
    path = Path(rig.tmp) / "history.db"
    url = f"sqlite:///{path}"
    t = time.monotonic()
    asyncio.run(_migrate_with_channels(url))
    end = history_build.build_sqlite(path, rows)
    return url, end, {"built_s": round(time.monotonic() - t, 1)}


def run(rig: Rig) -> list[Result]:
    counts = rig.counts
    out: list[Result] = []
    for backend, rows, data in (
        ("postgresql", counts.history_pg, _pg_data),
        ("sqlite", counts.history_sqlite, _sqlite_data),
    ):
        kept = backend == "postgresql" and rig.keep_history
        with _secret_key_file(KEPT_KEY_FILE if kept else None):
            url, end, notes = data(rig, rows)
            print(f"  history/{backend}: {rows:,} deliveries ready {notes}", flush=True)
            found = asyncio.run(measure(url, end, counts.history_reps))
        out.extend(_results(backend, rows, found, notes))
    try:
        out.extend(wal.run(rig))
    except Exception as error:  # the history figures above still count
        out.append(
            Result("history/wal-bytes-per-message", None, "", "postgresql", error=repr(error))
        )
    return out
