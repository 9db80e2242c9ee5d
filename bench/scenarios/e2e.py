"""The e2e scenarios: webhooks published through the library, then drained by `tidings
worker` processes into the sink; each run paired with a run of `raw`."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import workload
from bench.database import States, drain, states_pg, states_sqlite
from bench.processes import Sink, workers
from bench.result import Result
from bench.rig import Rig
from bench.scenarios.raw import raw_once

TIMEOUT_S = 600
UNIT = "deliveries/s"  # the unit the report takes ratios to raw for


@dataclass(frozen=True)
class Variant:
    name: str
    backend: str
    processes: int
    channels: int


VARIANTS = (
    Variant("e2e/pg-1proc", "postgresql", 1, 1),
    Variant("e2e/pg-2proc", "postgresql", 2, 1),
    Variant("e2e/sqlite-1proc", "sqlite", 1, 1),
    Variant("e2e/pg-1proc-100ch", "postgresql", 1, 100),
)


@dataclass(frozen=True)
class Drain:
    """One drain: `events` published to each of `channels` webhooks (`total` deliveries),
    then `processes` workers started on `db_url` and timed until every row is sent."""

    tmp: Path
    db_url: str
    states: States
    sink: Sink
    channels: int
    events: int
    total: int
    processes: int


def _publish(run: Drain) -> float:
    """Set the database up and publish every event; the seconds publishing took."""
    specs = [workload.webhook(f"hook-{i}", run.sink.url("/hook")) for i in range(run.channels)]
    asyncio.run(workload.setup(run.db_url, specs))
    t_pub = time.monotonic()
    asyncio.run(workload.publish_all(run.db_url, [workload.event(i) for i in range(run.events)]))
    publish_s = time.monotonic() - t_pub
    pending = run.states()
    if sum(pending.values()) != run.total:
        raise RuntimeError(f"expected {run.total} deliveries, found {pending}")
    return publish_s


def run_drain(
    run: Drain, before_start: Callable[[], None] | None = None, **settings: object
) -> tuple[float, dict[str, Any]]:
    """deliveries/s from the workers' "started" line to the last row sent, and the notes.
    `before_start` runs after publishing, right before the workers start; `settings` go to
    the workers besides the drain's own."""
    publish_s = _publish(run)
    sink_before = run.sink.stats()["count"]
    if before_start:
        before_start()
    settings = {"poll_interval_s": 1, "lease_s": 120} | settings
    with workers(run.tmp, run.db_url, run.processes, **settings) as started:
        ready = [w.wait_started() for w in started]
        t0 = min(ready)
        # Wait on the sink first, then poll the database only for the last outcomes: counting
        # every row's state all along would load the database being measured.
        run.sink.wait_for(sink_before + run.total, TIMEOUT_S)
        done_at, final = drain(run.states, run.total, TIMEOUT_S, interval_s=0.01)
        rss = [w.peak_rss_kib() for w in started]
        spawn_to_ready = max(r - w.spawned_at for r, w in zip(ready, started, strict=True))
    elapsed = done_at - t0
    if final.get("sent", 0) != run.total:
        raise RuntimeError(f"not every delivery was sent: {final}")
    return run.total / elapsed, {
        "deliveries": run.total,
        "events": run.events,
        "channels": run.channels,
        "processes": run.processes,
        "drain_s": round(elapsed, 3),
        "startup_s": round(spawn_to_ready, 3),
        "publish_s": round(publish_s, 3),
        "sink_received": run.sink.stats()["count"] - sink_before,
        "worker_peak_rss_mib": [round(r / 1024, 1) if r else None for r in rss],
        "timing": "from the worker logging 'dispatcher … started' to all rows sent "
        "(the sink's count waited for, then the rows' states polled every 10 ms)",
    }


def _once(rig: Rig, variant: Variant) -> tuple[float, dict[str, Any]]:
    """One drain of `variant` on a fresh database (PostgreSQL) or file (SQLite)."""
    events = rig.counts.e2e // variant.channels

    def drain_on(url: str, states: States) -> tuple[float, dict[str, Any]]:
        run = Drain(
            rig.tmp,
            url,
            states,
            rig.sink,
            channels=variant.channels,
            events=events,
            total=events * variant.channels,
            processes=variant.processes,
        )
        return run_drain(run)

    if variant.backend == "postgresql":
        with rig.pg.database() as (dbname, url):
            return drain_on(url, states_pg(rig.pg, dbname))
    path = rig.tmp / f"e2e-{time.monotonic_ns()}.db"
    return drain_on(f"sqlite:///{path}", states_sqlite(path))


def paired(
    rig: Rig, label: str, once: Callable[[], tuple[float, dict[str, Any]]]
) -> tuple[float, float, dict[str, Any]]:
    """`rig.rounds` runs of `once`, each right after a run of raw: the median rate, the median
    of the paired ratios (a shared, noisy machine that slows down or speeds up during the
    bench moves both sides of each ratio alike) and the last run's notes with every run."""
    runs: list[tuple[float, float, dict[str, Any]]] = []
    for _ in range(rig.rounds):
        raw = raw_once(rig)
        rig.raws.append(raw)
        rate, notes = once()
        runs.append((rate, raw, notes))
        print(f"  {label}: {rate:,.0f}/s, raw {raw:,.0f}/s", flush=True)
    notes = dict(runs[-1][2])
    notes.pop("drain_s", None)
    notes["runs"] = [
        {"rate": round(rate), "raw": round(raw), "drain_s": n["drain_s"]} for rate, raw, n in runs
    ]
    return (
        statistics.median(rate for rate, _, _ in runs),
        statistics.median(rate / raw for rate, raw, _ in runs),
        notes,
    )


def _paired(rig: Rig, variant: Variant) -> Result:
    rate, ratio, notes = paired(rig, variant.name, lambda: _once(rig, variant))
    return Result(variant.name, rate, UNIT, variant.backend, ratio_to_raw=ratio, notes=notes)


def run(rig: Rig) -> list[Result]:
    """Every variant in turn; one that fails is reported and the next one still runs."""
    out: list[Result] = []
    for variant in VARIANTS:
        try:
            out.append(_paired(rig, variant))
        except Exception as error:
            failed = Result(variant.name, None, UNIT, variant.backend, error=repr(error))
            out.append(failed)
            print(f"  {variant.name}: {error!r}", flush=True)
    return out
