"""The retention scenarios (R1) on PostgreSQL:

- `retention/e2e-while-purging`: the e2e drain of one webhook channel on a database holding
  `retention_old` ended deliveries (with an attempt row and an event each) past their
  retention, by workers that purge them meanwhile, as a ratio to the same drain by workers
  with retention off on a copy of the same database. Target ≥ 0.90.
- `retention/latency-p99-while-purging`: idle publish → receipt p99 while a worker purges, as a
  ratio to the same with retention off. Target ≤ 2.
- `retention/idle-purge-rate`: old rows a worker with nothing to deliver purges a second (a
  purge yields to deliveries, so this is the pace at which a backlog of expired rows goes).
- `retention/steady-size-growth`: steady publishing with a retention of seconds; the tables'
  and indexes' size at the end over their size halfway (1.0: they stopped growing; without
  retention it would be about 2).

The old rows are built once with bulk SQL in a template database; each run gets a copy of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import Iterator
from typing import Any

from bench import workload
from bench.processes import workers
from bench.result import Result
from bench.rig import Rig
from bench.scenarios.e2e import Drain, run_drain
from bench.scenarios.latency import POLL_INTERVAL_S, percentile, publish_one_by_one

#: Days the workers keep ended rows; the old rows are older than this.
RETENTION_DAYS = 30
OLD_AGE = "40 days"
TABLES = ("deliveries", "attempts", "events")


def _build_template(rig: Rig, name: str, old_rows: int) -> None:
    """A migrated database with one webhook channel and `old_rows` ended deliveries, each with
    its event and one attempt row, created OLD_AGE ago; ANALYZEd."""
    url = rig.pg.server.url(name)
    # A channel of its own: the drains create theirs (hook-0, lat) on each copy.
    asyncio.run(
        workload.setup(
            url, [workload.webhook("old", rig.sink.url("/old"), filter={"kinds": ["bench.old"]})]
        )
    )
    with rig.pg.connect(name) as conn:
        conn.execute(
            "INSERT INTO events (kind, subject, severity, title, body, labels, data, created_at)"
            " SELECT 'bench.old', 'host-' || (g %% 97), 'high', 'old event ' || g,"
            " 'A benchmark event past its retention.', '{}'::jsonb,"
            " jsonb_build_object('i', g), now() - %s::interval"
            " FROM generate_series(1, %s) AS g",
            (OLD_AGE, old_rows),
        )
        conn.execute(
            "INSERT INTO deliveries (event_id, channel_id, state, attempts, next_attempt_at,"
            " created_at, sent_at, message_id)"
            " SELECT e.id, c.id, 'sent', 1, e.created_at, e.created_at, e.created_at,"
            " md5(e.id::text) FROM events e, channels c WHERE e.kind = 'bench.old'"
        )
        conn.execute(
            "INSERT INTO attempts (delivery_id, worker_id, status, duration_ms, started_at,"
            " finished_at) SELECT id, 'bench-old', 'delivered', 5, created_at, created_at"
            " FROM deliveries"
        )
        conn.execute("VACUUM ANALYZE")


@contextlib.contextmanager
def _template(rig: Rig, old_rows: int) -> Iterator[str]:
    name = f"tidings_bench_tmpl_{uuid.uuid4().hex[:8]}"
    with rig.pg.server.admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        t = time.monotonic()
        _build_template(rig, name, old_rows)
        print(f"  built {old_rows:,} old deliveries in {time.monotonic() - t:.1f} s", flush=True)
        yield name
    finally:
        rig.pg.server.drop_database(name)


@contextlib.contextmanager
def _copy_of(rig: Rig, template: str) -> Iterator[tuple[str, str]]:
    """A new database copied from `template`: its name and URL; dropped on the way out."""
    name = f"tidings_bench_{uuid.uuid4().hex[:10]}"
    with rig.pg.server.admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield name, rig.pg.server.url(name)
    finally:
        rig.pg.server.drop_database(name)


def _old_left(rig: Rig, name: str) -> int:
    with rig.pg.connect(name) as conn:
        row = conn.execute(
            "SELECT count(*) FROM deliveries WHERE created_at < now() - interval '31 days'"
        ).fetchone()
    return int(row[0]) if row else 0


def _drain(rig: Rig, template: str, old_rows: int, days: float) -> tuple[float, dict[str, Any]]:
    """One e2e drain of `rig.counts.e2e` fresh deliveries on a copy of `template`."""
    with _copy_of(rig, template) as (name, url):
        run = Drain(
            rig.tmp,
            url,
            _fresh_states(rig, name),
            rig.sink,
            channels=1,
            events=rig.counts.e2e,
            total=rig.counts.e2e,
            processes=1,
        )
        rate, notes = run_drain(run, retention_days=days)
        notes["old_rows_purged_during_drain"] = old_rows - _old_left(rig, name)
        return rate, notes


def _fresh_states(rig: Rig, name: str) -> Any:
    """Deliveries per state among the fresh rows only (the old ones are all `sent`)."""
    conn = rig.pg.connect(name)

    def states() -> dict[str, int]:
        rows = conn.execute(
            "SELECT state, count(*) FROM deliveries WHERE created_at > now() - interval '1 day'"
            " GROUP BY state"
        ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    return states


def _e2e(rig: Rig, template: str, old_rows: int) -> Result:
    """Rounds of (retention off, retention on), each pair on copies of the same template, in
    turns off-first and on-first (whatever the first of two drains leaves behind, such as
    dirty pages to write, falls on each side alike); the ratio is the median of the paired
    ratios."""
    runs: list[dict[str, Any]] = []
    for round_ in range(rig.rounds + rig.rounds % 2):  # as many of each order
        if round_ % 2 == 0:
            off, _notes = _drain(rig, template, old_rows, 0)
            on, notes = _drain(rig, template, old_rows, RETENTION_DAYS)
        else:
            on, notes = _drain(rig, template, old_rows, RETENTION_DAYS)
            off, _notes = _drain(rig, template, old_rows, 0)
        purged = notes["old_rows_purged_during_drain"]
        runs.append({"off": round(off), "on": round(on), "purged_during_drain": purged})
        print(f"  retention e2e: off {off:,.0f}/s, purging {on:,.0f}/s ({purged:,} purged)")
    ratio = statistics.median(r["on"] / r["off"] for r in runs)
    return Result(
        "retention/e2e-while-purging",
        statistics.median(r["on"] for r in runs),
        "deliveries/s (purging)",
        "postgresql",
        notes={
            "ratio_to_retention_off": round(ratio, 3),
            "target": ">= 0.90",
            "old_rows": old_rows,
            "deliveries": rig.counts.e2e,
            "runs": runs,
        },
    )


def _latency(rig: Rig, template: str, days: float) -> tuple[list[float], int]:
    """Idle publish → receipt (ms) on a copy of `template`; and the old rows purged meanwhile."""
    with _copy_of(rig, template) as (name, url):
        asyncio.run(workload.setup(url, [workload.webhook("lat", rig.sink.url("/lat"))]))
        before = _old_left(rig, name)
        settings = {"poll_interval_s": POLL_INTERVAL_S, "lease_s": 120, "retention_days": days}
        with workers(rig.tmp, url, 1, **settings) as started:
            started[0].wait_started()
            rig.sink.reset()
            asyncio.run(publish_one_by_one(url, rig.sink, rig.counts.latency))
            lat = [x * 1000 for x in rig.sink.stats()["latencies"]]
        return lat, before - _old_left(rig, name)


def _latency_result(rig: Rig, template: str) -> Result:
    off, _ = _latency(rig, template, 0)
    on, purged = _latency(rig, template, RETENTION_DAYS)
    p99_off, p99_on = percentile(off, 0.99), percentile(on, 0.99)
    return Result(
        "retention/latency-p99-while-purging",
        p99_on,
        "ms",
        "postgresql",
        notes={
            "p99_retention_off_ms": round(p99_off, 2),
            "ratio_to_retention_off": round(p99_on / p99_off, 2),
            "p50_ms": {"off": round(percentile(off, 0.5), 2), "on": round(percentile(on, 0.5), 2)},
            "target": "<= 2x",
            "events": len(on),
            "old_rows_purged_meanwhile": purged,
        },
    )


def _idle_rate(rig: Rig, template: str, seconds: float) -> Result:
    """Rows a worker with nothing to deliver purges a second, over `seconds` of its purge."""
    with _copy_of(rig, template) as (name, url):
        before = _old_left(rig, name)
        settings = {"poll_interval_s": POLL_INTERVAL_S, "lease_s": 120}
        with workers(rig.tmp, url, 1, retention_days=RETENTION_DAYS, **settings) as started:
            started[0].wait_started()
            began = time.monotonic()
            time.sleep(seconds)
            left = _old_left(rig, name)
            elapsed = time.monotonic() - began
        purged = before - left
    return Result(
        "retention/idle-purge-rate",
        round(purged / elapsed),
        "old deliveries purged/s, nothing to deliver",
        "postgresql",
        notes={
            "purged": purged,
            "seconds": round(elapsed, 1),
            "with": "each delivery's attempt row and event",
            "million_in_min": round(1_000_000 / (purged / elapsed) / 60, 1) if purged else None,
        },
    )


def _sizes(rig: Rig, name: str) -> int:
    """Bytes of the tables that retention bounds, their indexes and TOAST included."""
    with rig.pg.connect(name) as conn:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(t)) FROM unnest(%s::regclass[]) AS t",
            (list(TABLES),),
        ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _autovacuum(rig: Rig) -> bool:
    with rig.pg.server.admin() as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    return bool(row and row[0] == "on")


def _vacuum(rig: Rig, name: str) -> None:
    """What autovacuum does for these tables: make the purged rows' space reusable."""
    with rig.pg.connect(name) as conn:
        conn.execute("VACUUM " + ", ".join(TABLES))


async def _publish_steadily(url: str, per_s: int, seconds: float, on_tick: Any) -> int:
    import tidings

    sent = 0
    async with tidings.Hub(url) as hub:
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < seconds:
            await hub.publish_many([workload.event(sent + i) for i in range(per_s // 10)])
            sent += per_s // 10
            on_tick(elapsed)
            await asyncio.sleep(max(0.0, began + sent / per_s - time.monotonic()))
    return sent


def _steady(rig: Rig, seconds: float, per_s: int, keep_s: float) -> Result:
    """Publish `per_s` events a second for `seconds` to a worker that keeps ended rows
    `keep_s` seconds; sample the tables' size as it goes."""
    samples: list[tuple[float, int]] = []
    every = seconds / 16
    vacuum_by_bench = not _autovacuum(rig)
    with rig.pg.database() as (name, url):
        asyncio.run(workload.setup(url, [workload.webhook("hook-0", rig.sink.url("/steady"))]))
        settings = {"poll_interval_s": 1, "lease_s": 120, "retention_days": keep_s / 86400}
        with workers(rig.tmp, url, 1, **settings) as started:
            started[0].wait_started()

            def tick(elapsed: float) -> None:
                if not samples or elapsed - samples[-1][0] >= every:
                    if vacuum_by_bench:
                        _vacuum(rig, name)
                    samples.append((elapsed, _sizes(rig, name)))

            published = asyncio.run(_publish_steadily(url, per_s, seconds, tick))
        samples.append((seconds, _sizes(rig, name)))
    half = [size for at, size in samples if at >= seconds / 2]
    growth = samples[-1][1] / half[0]
    return Result(
        "retention/steady-size-growth",
        round(growth, 3),
        "size at end / size halfway",
        "postgresql",
        notes={
            "published": published,
            "per_s": per_s,
            "seconds": seconds,
            "kept_s": keep_s,
            "purge_look_every_s": 60,
            "vacuum": "by the bench at each sample: the server's autovacuum is off"
            if vacuum_by_bench
            else "the server's autovacuum",
            "sizes_mib": [[round(at), round(size / 2**20, 2)] for at, size in samples],
            "without_retention": "the rows, and so the sizes, would double from halfway",
        },
    )


def run(rig: Rig) -> list[Result]:
    old_rows = rig.counts.retention_old
    out: list[Result] = []
    quick = old_rows < 100_000
    measures = {
        "retention/e2e-while-purging": lambda template: _e2e(rig, template, old_rows),
        "retention/latency-p99-while-purging": lambda template: _latency_result(rig, template),
        "retention/idle-purge-rate": lambda template: _idle_rate(
            rig, template, seconds=5 if quick else 30
        ),
        "retention/steady-size-growth": lambda _template: _steady(
            rig,
            seconds=20 if quick else 240,
            per_s=100 if quick else 200,
            keep_s=10 if quick else 30,
        ),
    }
    with _template(rig, old_rows) as template:
        for name, measure in measures.items():
            try:
                out.append(measure(template))
            except Exception as error:
                out.append(Result(name, None, "", "postgresql", error=repr(error)))
                print(f"  {name}: {error!r}", flush=True)
    return out
