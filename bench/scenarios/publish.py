"""The publish scenarios: events/s into one webhook channel over HTTP (`tidings serve`), through
the library one at a time, and in batches of 1,000 from a fresh process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench import workload
from bench.processes import ROOT, free_port, serving, tidings_env
from bench.result import Result
from bench.rig import Rig


async def _publish_http(base: str, token: str, n: int, concurrency: int) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    counter = iter(range(n))
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:

        async def lane() -> None:
            for i in counter:
                r = await client.post("/v1/events", json=workload.event(i))
                if r.status_code != 201:
                    raise RuntimeError(f"publish answered {r.status_code}: {r.text[:200]}")

        await client.post("/v1/events", json=workload.event(-1))  # warm-up (connection, caches)
        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        return n / (time.perf_counter() - started)


async def _publish_lib(url: str, n: int) -> float:
    import tidings  # on use: see bench/scenarios/raw.py

    async with tidings.Hub(url) as hub:
        await hub.publish(**workload.event(-1))  # warm-up
        started = time.perf_counter()
        for i in range(n):
            await hub.publish(**workload.event(i))
        return n / (time.perf_counter() - started)


def _publish_batches(url: str, batches: int, settle: bool) -> float:
    """Batches of 1,000 in a fresh process (bench/publish_batches.py), so the collector's
    state is the publisher's own, not this driver's."""
    args = [sys.executable, "-m", "bench.publish_batches", url, str(batches)]
    done = subprocess.run(
        [*args, "--settle"] if settle else args,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return float(done.stdout.strip().splitlines()[-1])


def _token(tmp: Path, url: str) -> str:
    """A publish-scoped API token, made with the CLI as an operator would."""
    command = ["tidings", "token", "create", "--name", "bench", "--scope", "publish", "--db", url]
    made = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        check=True,
        env=tidings_env(url),
        cwd=tmp,
    )
    return made.stdout.strip().splitlines()[-1]


def _over_http(rig: Rig, url: str) -> list[Result]:
    token = _token(rig.tmp, url)
    n = rig.counts.publish_single
    out: list[Result] = []
    with serving(rig.tmp, url, free_port(), poll_interval_s=10) as base:
        for concurrency in (1, 4):
            rate = asyncio.run(_publish_http(base, token, n, concurrency))
            notes = {"events": n, "concurrency": concurrency, "fan_out": 1}
            name = f"publish/http-single-c{concurrency}"
            out.append(Result(name, rate, "events/s", "postgresql", notes=notes))
    return out


def _through_library(rig: Rig, url: str) -> list[Result]:
    n = rig.counts.publish_single
    single = asyncio.run(_publish_lib(url, n))
    notes = {"events": n, "sequential": True, "fan_out": 1}
    out = [Result("publish/lib-single", single, "events/s", "postgresql", notes=notes)]
    batches = rig.counts.publish_batches
    for suffix, settle in (("", False), ("-settled", True)):
        rate = _publish_batches(url, batches, settle)
        batch_notes = {"batches": batches, "fan_out": 1, "process": "fresh", "settle_heap": settle}
        name = f"publish/lib-batch-1000{suffix}"
        out.append(Result(name, rate, "events/s", "postgresql", notes=batch_notes))
    return out


def run(rig: Rig) -> list[Result]:
    with rig.pg.database() as (_name, url):
        asyncio.run(workload.setup(url, [workload.webhook("hook", rig.sink.url("/hook"))]))
        return _over_http(rig, url) + _through_library(rig, url)
