"""The publish scenarios: single events over HTTP (`tidings serve --no-dispatch`, three matching
channels) against a bare FastAPI app on the same stack at 1, 4 and 32 connections; through
the library one at a time; and batches of 1,000 from a fresh process against bare multi-row
inserts and COPY. Ratios are to the baseline measured in the same run."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import load, workload
from bench.cpu import metered
from bench.processes import ROOT, free_port, served, serving, stop, tidings_env
from bench.result import Result
from bench.rig import Rig

#: Concurrent connections of the HTTP ingest runs, and how long each run lasts.
CONCURRENCIES = (1, 4, 32)
INGEST_SECONDS = 6.0
INGEST_SECONDS_QUICK = 2.0
#: Channels every published event matches (so each publish writes 1 + FAN_OUT rows).
FAN_OUT = 3


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


@contextlib.contextmanager
def _bare_app(url: str, port: int, channel_id: int) -> Iterator[tuple[str, int]]:
    """The bare baseline app (bench/bare_app.py) on `port`: its base URL once it listens,
    and its process id."""
    command = [sys.executable, "-m", "bench.bare_app", url, str(port), str(channel_id)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise RuntimeError("bench.bare_app did not start")
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop(process)


@dataclass
class _Side:
    """One server under load: where it listens, its process, its database, its token."""

    base: str
    pid: int
    database: str
    token: str | None
    rates: dict[int, list[float]] = field(default_factory=dict)
    cpu: dict[int, list[dict[str, float]]] = field(default_factory=dict)

    def run(self, rig: Rig, seconds: float, concurrency: int) -> float:
        with metered(rig.pg, self.database, self.pid) as meter:
            rate = load.rate(self.base, seconds, concurrency, self.token)
        self.rates.setdefault(concurrency, []).append(rate)
        self.cpu.setdefault(concurrency, []).append(meter.per_event_ms(rate * seconds))
        return rate


def _ingest_database(rig: Rig, name: str, url: str) -> int:
    """Three matching channels; the first one's id."""
    hooks = [workload.webhook(f"hook-{i}", rig.sink.url("/hook")) for i in range(FAN_OUT)]
    asyncio.run(workload.setup(url, hooks))
    with rig.pg.connect(name) as conn:
        row = conn.execute("SELECT min(id) FROM channels").fetchone()
    return int(row[0]) if row else 1


def _over_http(rig: Rig) -> list[Result]:
    """Rounds of, at each concurrency: the bare app, then tidings, for the same time, each on
    a database of its own (so each one's backends can be metered); tidings' figure as a ratio
    to the bare one just before it; the medians over the rounds."""
    seconds = INGEST_SECONDS_QUICK if rig.counts.publish_single <= 200 else INGEST_SECONDS
    with rig.pg.database() as (bare_db, bare_url), rig.pg.database() as (name, url):
        channel_id = _ingest_database(rig, bare_db, bare_url)
        _ingest_database(rig, name, url)
        token = _token(rig.tmp, url)
        with (
            _bare_app(bare_url, free_port(), channel_id) as (bare_base, bare_pid),
            served(rig.tmp, url, free_port(), poll_interval_s=10) as (base, serve),
        ):
            bare = _Side(bare_base, bare_pid, bare_db, None)
            mine = _Side(base, serve.pid, name, token)
            for side in (bare, mine):  # warm-up: pools open, statements prepared
                load.rate(side.base, 1, max(CONCURRENCIES), side.token)
            for _ in range(rig.rounds):
                for concurrency in CONCURRENCIES:
                    bare.run(rig, seconds, concurrency)
                    mine.run(rig, seconds, concurrency)
    return [r for c in CONCURRENCIES for r in _ingest_results(bare, mine, c, seconds)]


def _ingest_results(bare: _Side, mine: _Side, concurrency: int, seconds: float) -> list[Result]:
    notes = {"seconds": seconds, "concurrency": concurrency, "client": load.generator()}
    bares, rates = bare.rates[concurrency], mine.rates[concurrency]
    ratio = statistics.median(m / b for m, b in zip(rates, bares, strict=True))
    bare_notes = notes | {"runs": _rounded(bares)} | _median_cpu(bare.cpu[concurrency])
    mine_notes = notes | {"fan_out": FAN_OUT, "vs": "http-bare", "runs": _rounded(rates)}
    return [
        Result(f"publish/http-bare-c{concurrency}", statistics.median(bares), "events/s",
               "postgresql", None, bare_notes),
        Result(f"publish/http-single-c{concurrency}", statistics.median(rates), "events/s",
               "postgresql", ratio, mine_notes | _median_cpu(mine.cpu[concurrency])),
    ]  # fmt: skip


def _median_cpu(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for run in runs for k in run}
    return {k: statistics.median(run[k] for run in runs if k in run) for k in sorted(keys)}


def _rounded(rates: list[float]) -> list[int]:
    return [round(r) for r in rates]


def _bare_batches(url: str, batches: int, channel_id: int) -> dict[str, float]:
    """Events/s of each bare method (bench/bare_batch.py), in a fresh process."""
    args = [sys.executable, "-m", "bench.bare_batch", url, str(batches), str(channel_id)]
    done = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT)
    pairs = (line.split() for line in done.stdout.strip().splitlines())
    return {method: float(rate) for method, rate in pairs}


def _http_batches(rig: Rig, url: str, batches: int) -> float:
    """Events/s of `POST /v1/events/batch` with 1,000 events, one request at a time."""
    token = _token(rig.tmp, url)
    body = {"events": [workload.event(i) for i in range(1000)]}
    with (
        serving(rig.tmp, url, free_port(), poll_interval_s=10) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as client,
    ):
        client.post("/v1/events/batch", json=body, timeout=60).raise_for_status()  # warm-up
        started = time.perf_counter()
        for _ in range(batches):
            client.post("/v1/events/batch", json=body, timeout=60).raise_for_status()
        return batches * 1000 / (time.perf_counter() - started)


def _through_library(rig: Rig, url: str) -> list[Result]:
    n = rig.counts.publish_single
    single = asyncio.run(_publish_lib(url, n))
    notes = {"events": n, "sequential": True, "fan_out": 1}
    return [Result("publish/lib-single", single, "events/s", "postgresql", notes=notes)]


def _batches(rig: Rig, url: str) -> list[Result]:
    """Rounds of: the bare methods, tidings' library batch (fresh process, with and without
    settle_heap) and the HTTP batch route, each round's figures as ratios to that round's
    faster bare method; the medians over the rounds (a busy machine moves single runs)."""
    batches = rig.counts.publish_batches
    runs: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for _ in range(rig.rounds):
        bare = _bare_batches(url, batches, channel_id=1)
        best = max(bare.values())
        mine = {
            "lib-batch-1000": _publish_batches(url, batches, False),
            "lib-batch-1000-settled": _publish_batches(url, batches, True),
            "http-batch-1000": _http_batches(rig, url, batches),
        }
        for method, rate in bare.items():
            runs.setdefault(f"bare-batch-1000-{method}", []).append(rate)
        for name, rate in mine.items():
            runs.setdefault(name, []).append(rate)
            ratios.setdefault(name, []).append(rate / best)
    out = []
    for name, rates in runs.items():
        notes = {"batches": batches, "fan_out": 1, "runs": _rounded(rates)}
        ratio = statistics.median(ratios[name]) if name in ratios else None
        if ratio is not None:
            notes["vs"] = "the faster bare method of the same round"
        figure = statistics.median(rates)
        out.append(Result(f"publish/{name}", figure, "events/s", "postgresql", ratio, notes))
    return out


def run(rig: Rig) -> list[Result]:
    # One secret key for this driver and the processes it starts (they inherit the
    # environment): otherwise the driver writes a key file in its own directory, and
    # `tidings serve`, started in the rig's, finds none.
    os.environ.setdefault("TIDINGS_SECRET_KEY", base64.b64encode(os.urandom(32)).decode())
    out = _over_http(rig)
    with rig.pg.database() as (_name, url):
        asyncio.run(workload.setup(url, [workload.webhook("hook", rig.sink.url("/hook"))]))
        return out + _through_library(rig, url) + _batches(rig, url)
