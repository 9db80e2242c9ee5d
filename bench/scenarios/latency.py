"""The latency scenario: publish → receipt at the sink, one event at a time, through an idle
worker whose poll interval (10 s) is far longer than any figure, so only wake-ups count.

Its baseline is the bare pipeline (bench/bare_pipeline.py): the same hops — a durable
one-statement publish with NOTIFY, a lease, a POST — without tidings, on a database of its
own with the same tables. The two take turns event by event, so a machine whose idle
wake-ups get faster or slower during the run moves both alike; tidings' figures are given as
ratios to it."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx

from bench import bare_pipeline, workload
from bench.keys import shared_key_file
from bench.processes import ROOT, Sink, stop, workers
from bench.result import Result
from bench.rig import Rig

POLL_INTERVAL_S = 10
#: The idle gap between two events.
GAP_S = 0.05

Publish = Callable[[dict[str, Any]], Awaitable[object]]


async def _one_by_one(sink: Sink, n: int, publish: Publish) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        for i in range(n):
            # The receipt is waited for with a long poll: polling the sink would load the
            # very processes whose latency is measured.
            arrived = asyncio.create_task(
                client.get(sink.url("/wait"), params={"count": i + 1, "timeout": 15})
            )
            await asyncio.sleep(0.002)  # the long poll is in place before the publish
            await publish(workload.event(i, t=time.time()))
            if int((await arrived).json()["count"]) < i + 1:
                raise TimeoutError(f"event {i} did not arrive within 15 s")
            await asyncio.sleep(GAP_S)


async def publish_one_by_one(url: str, sink: Sink, n: int) -> None:
    """`n` events published through the library one at a time, each awaited at the sink."""
    import tidings  # on use: see bench/scenarios/raw.py

    async with tidings.Hub(url) as hub:
        await _one_by_one(sink, n, lambda event: hub.publish(**event))


async def _taking_turns(url: str, bare_url: str, sink: Sink, n: int, channel_id: int) -> None:
    """`n` events through each, one at a time: tidings, then the bare pipeline, and so on."""
    import asyncpg

    import tidings  # on use: see bench/scenarios/raw.py

    conn = await asyncpg.connect(bare_url)
    try:
        async with tidings.Hub(url) as hub:
            turn = 0

            async def publish(event: dict[str, Any]) -> object:
                nonlocal turn
                turn += 1
                if turn % 2:
                    return await hub.publish(**event)
                return await bare_pipeline.publish_one(conn, channel_id, event)

            await _one_by_one(sink, 2 * n, publish)
    finally:
        await conn.close()


def percentile(values: list[float], q: float) -> float:
    """The value at rank q·(n-1), rounded: no interpolation between two measured values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@contextlib.contextmanager
def _bare_worker(url: str, sink_url: str) -> Iterator[None]:
    command = [sys.executable, "-m", "bench.bare_pipeline", "worker", url, sink_url]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise RuntimeError("bench.bare_pipeline did not start")
        yield
    finally:
        stop(process)


def _channel_id(rig: Rig, name: str) -> int:
    with rig.pg.connect(name) as conn:
        row = conn.execute("SELECT min(id) FROM channels").fetchone()
    assert row is not None
    return int(row[0])


def _measured(rig: Rig) -> tuple[list[float], list[float]]:
    """(tidings' latencies, the bare pipeline's), in ms."""
    n = rig.counts.latency
    sink = rig.sink
    hook = workload.webhook("lat", sink.url("/lat"))
    with rig.pg.database() as (bare_name, bare_url), rig.pg.database() as (_name, url):
        asyncio.run(workload.setup(bare_url, [hook]))
        asyncio.run(workload.setup(url, [hook]))
        channel_id = _channel_id(rig, bare_name)
        settings = {"poll_interval_s": POLL_INTERVAL_S, "lease_s": 120}
        with _bare_worker(bare_url, sink.url("/lat")), workers(rig.tmp, url, 1, **settings) as w:
            w[0].wait_started()
            time.sleep(0.5)
            sink.reset()
            asyncio.run(_taking_turns(url, bare_url, sink, n, channel_id))
            # Arrived in the order published: one at a time, each awaited.
            received = [x * 1000 for x in sink.stats()["latencies"]]
            return received[0::2], received[1::2]


def run(rig: Rig) -> list[Result]:
    with shared_key_file(rig.tmp):
        lat, bare = _measured(rig)
    notes: dict[str, Any] = {
        "events": len(lat),
        "poll_interval_s": POLL_INTERVAL_S,
        "mean_ms": round(statistics.mean(lat), 2),
        "max_ms": round(max(lat), 2),
        # The first event after the worker started and the publisher opened: what their
        # warm-up left to do (a connection's first statement, a TCP connection's set-up).
        "first_ms": round(lat[0], 2),
        "bare_pipeline": {
            "events": len(bare),
            "p50_ms": round(percentile(bare, 0.50), 3),
            "p99_ms": round(percentile(bare, 0.99), 3),
            "first_ms": round(bare[0], 2),
        },
        "clock": "time.time() on both sides, same machine",
    }
    return [
        Result(
            f"latency/{name}",
            percentile(lat, q),
            "ms",
            "postgresql",
            ratio_to_raw=percentile(lat, q) / percentile(bare, q),
            notes=notes,
        )
        for name, q in (("p50", 0.50), ("p99", 0.99))
    ] + [
        Result(f"latency/bare-{name}", percentile(bare, q), "ms", "postgresql", notes=notes)
        for name, q in (("p50", 0.50), ("p99", 0.99))
    ]
