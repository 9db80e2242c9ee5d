"""Fairness, on PostgreSQL: one channel drains a 100,000-row backlog while 100 quiet channels
each get one event a second; the quiet channels' publish → receipt latency (p50/p99) and the
backlog's drain rate, through one worker."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from bench import bulk, workload
from bench.keys import shared_key_file
from bench.processes import workers
from bench.result import Result
from bench.rig import Rig
from bench.scenarios.latency import percentile

#: Longest the quiet channels are published to while the backlog drains.
MAX_S = 120.0
#: Longest the last quiet events are waited for once publishing stopped.
QUIET_WAIT_S = 30.0


@dataclass(frozen=True)
class Sizes:
    backlog: int
    quiet: int
    #: Seconds of quiet events at least (the backlog may drain sooner).
    min_s: float

    @classmethod
    def of(cls, rig: Rig) -> Sizes:
        if rig.counts.e2e < 20_000:  # --quick
            return cls(backlog=2_000, quiet=10, min_s=3.0)
        return cls(backlog=100_000, quiet=100, min_s=10.0)


def _specs(rig: Rig, sizes: Sizes) -> list[dict[str, Any]]:
    busy = workload.webhook("busy", rig.sink.url("/hook"), tenant="busy")
    quiet = [
        workload.webhook(f"quiet-{i}", rig.sink.url("/lat"), tenant=f"quiet-{i}")
        for i in range(sizes.quiet)
    ]
    return [busy, *quiet]


async def _publish_quietly(url: str, sizes: Sizes, backlog_left: Any) -> tuple[int, float]:
    """One event a second to each quiet channel, spread evenly, until the backlog is gone
    (and at least `min_s` passed); how many were published, and the seconds it took."""
    import tidings  # on use: see bench/scenarios/raw.py

    gap = 1.0 / sizes.quiet
    published = 0
    async with tidings.Hub(url) as hub:
        started = time.monotonic()
        next_at = started
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= MAX_S or (
                elapsed >= sizes.min_s
                and published % sizes.quiet == 0
                and await asyncio.to_thread(backlog_left) == 0
            ):
                return published, elapsed
            i = published % sizes.quiet
            event = workload.event(published, t=time.time()) | {"tenant": f"quiet-{i}"}
            await hub.publish(**event)
            published += 1
            next_at += gap
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


def run(rig: Rig) -> list[Result]:
    sizes = Sizes.of(rig)
    with shared_key_file(rig.tmp), rig.pg.database() as (name, url):
        bulk.setup(url, _specs(rig, sizes))
        with rig.pg.connect(name) as conn:
            row = conn.execute("SELECT id FROM channels WHERE name = 'busy'").fetchone()
            assert row is not None
            busy = int(row[0])
            bulk.pending_rows(conn, [busy], sizes.backlog)

            def backlog_left() -> int:
                found = conn.execute(
                    "SELECT count(*) FROM deliveries WHERE channel_id = %s AND state <> 'sent'",
                    (busy,),
                ).fetchone()
                return int(found[0]) if found else -1

            with workers(rig.tmp, url, 1, poll_interval_s=1, lease_s=120) as started:
                started[0].wait_started()
                rig.sink.reset()
                t0 = time.monotonic()
                published, elapsed = asyncio.run(_publish_quietly(url, sizes, backlog_left))
                left = backlog_left()
                drained_s = time.monotonic() - t0
                lat = _quiet_latencies_ms(rig, published, QUIET_WAIT_S)
    if len(lat) < published:
        raise RuntimeError(f"{published - len(lat)} quiet events never arrived")
    notes = {
        "backlog": sizes.backlog,
        "backlog_left": left,
        "drain_per_s": round((sizes.backlog - left) / drained_s),
        "quiet_channels": sizes.quiet,
        "quiet_events": published,
        "seconds": round(elapsed, 1),
        "p50_ms": round(percentile(lat, 0.50), 2),
        "max_ms": round(max(lat), 2),
    }
    return [
        Result("fairness/quiet-p99", percentile(lat, 0.99), "ms", "postgresql", notes=notes),
        Result("fairness/quiet-p50", percentile(lat, 0.50), "ms", "postgresql", notes=notes),
        Result(
            "fairness/backlog-drain",
            notes["drain_per_s"],
            "deliveries/s",
            "postgresql",
            notes=notes,
        ),
    ]


def _quiet_latencies_ms(rig: Rig, published: int, timeout_s: float) -> list[float]:
    """The quiet events' latencies once all `published` arrived (or `timeout_s` passed).
    Counted on their own: a backlog still draining when publishing stopped (a slow
    machine, past MAX_S) would reach any count of all receipts first."""
    deadline = time.monotonic() + timeout_s
    while True:
        lat = [x * 1000 for x in rig.sink.stats()["latencies"]]
        if len(lat) >= published or time.monotonic() > deadline:
            return lat
        time.sleep(0.1)
