"""The latency scenario: publish → receipt at the sink, one event at a time, through an idle
worker whose poll interval (10 s) is far longer than any figure, so only wake-ups count."""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

from bench import workload
from bench.keys import shared_key_file
from bench.processes import Sink, workers
from bench.result import Result
from bench.rig import Rig

POLL_INTERVAL_S = 10


async def _publish_one_by_one(url: str, sink: Sink, n: int) -> None:
    import tidings  # on use: see bench/scenarios/raw.py

    async with httpx.AsyncClient(timeout=20) as client, tidings.Hub(url) as hub:
        for i in range(n):
            # The receipt is waited for with a long poll: polling the sink would load the
            # very processes whose latency is measured.
            arrived = asyncio.create_task(
                client.get(sink.url("/wait"), params={"count": i + 1, "timeout": 15})
            )
            await asyncio.sleep(0.002)  # the long poll is in place before the publish
            await hub.publish(**workload.event(i, t=time.time()))
            if int((await arrived).json()["count"]) < i + 1:
                raise TimeoutError(f"event {i} did not arrive within 15 s")
            await asyncio.sleep(0.05)  # idle gap between events


def percentile(values: list[float], q: float) -> float:
    """The value at rank q·(n-1), rounded: no interpolation between two measured values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _latencies_ms(rig: Rig, url: str) -> list[float]:
    """Each event's publish → receipt time, as the sink recorded it (wall clock)."""
    settings = {"poll_interval_s": POLL_INTERVAL_S, "lease_s": 120}
    with workers(rig.tmp, url, 1, **settings) as started:
        started[0].wait_started()
        time.sleep(0.5)
        rig.sink.reset()
        asyncio.run(_publish_one_by_one(url, rig.sink, rig.counts.latency))
        return [x * 1000 for x in rig.sink.stats()["latencies"]]


def run(rig: Rig) -> list[Result]:
    with shared_key_file(rig.tmp), rig.pg.database() as (_name, url):
        asyncio.run(workload.setup(url, [workload.webhook("lat", rig.sink.url("/lat"))]))
        lat = _latencies_ms(rig, url)
    notes = {
        "events": len(lat),
        "poll_interval_s": POLL_INTERVAL_S,
        "mean_ms": round(statistics.mean(lat), 2),
        "max_ms": round(max(lat), 2),
        "clock": "time.time() on both sides, same machine",
    }
    return [
        Result("latency/p50", percentile(lat, 0.50), "ms", "postgresql", notes=notes),
        Result("latency/p99", percentile(lat, 0.99), "ms", "postgresql", notes=notes),
    ]
