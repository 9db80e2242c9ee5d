"""The part of the peer benchmarks that does not depend on the queue library: arguments, the
webhook body and POST, the worker subprocess, the drain timing and the JSON report.

Runs inside bench/peers/.venv (aiohttp, psycopg, uvloop), never in tidings' environment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import uvloop

CONCURRENCY = 50  # in-flight jobs per worker process, as tidings' e2e scenario uses
POLL_S = 0.25  # how often the driver counts finished jobs: bench/database.py's drain() default
BUDGET_S = 600.0  # the whole run (set-up, enqueue, drain) must end within this
READY = "ready"  # the line a worker prints on stdout once it can take jobs


# -- the workload --------------------------------------------------------------------------


def event(i: int) -> dict[str, Any]:
    """The same event as bench/workload.py's `event()`; duplicated because that module needs
    tidings' environment, which this venv does not have."""
    return {
        "kind": "bench.event",
        "subject": f"host-{i % 97}",
        "severity": "high",
        "title": f"bench event {i}: something happened on host-{i % 97}",
        "body": "A benchmark event with a short body of typical length for an alert.",
        "data": {"i": i},
    }


def body(ev: dict[str, Any]) -> bytes:
    """The webhook body tidings sends for an event (~400 bytes)."""
    return json.dumps({"type": "event", "event": ev}).encode()


def http_session() -> aiohttp.ClientSession:
    """One keep-alive session per worker process, capped like tidings' HTTP client."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY))


async def post(http: aiohttp.ClientSession, url: str, data: bytes) -> None:
    """One delivery. A non-2xx answer raises, so the queue records the job as failed."""
    async with http.post(url, data=data, headers={"content-type": "application/json"}) as r:
        await r.read()
        r.raise_for_status()


# -- command line --------------------------------------------------------------------------


@dataclass(frozen=True)
class Args:
    dsn: str
    sink: str
    jobs: int
    stats: str | None
    worker: bool


def parse_args(peer: str, argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(prog=f"{peer}_run.py")
    parser.add_argument("--dsn", required=True, help="an empty PostgreSQL database")
    parser.add_argument("--sink", required=True, help="URL each job POSTs to")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--stats", help="the sink's GET /stats URL, to check it got every POST")
    parser.add_argument("--worker", action="store_true", help="internal: be the worker process")
    ns = parser.parse_args(argv)
    return Args(ns.dsn, ns.sink, ns.jobs, ns.stats, ns.worker)


def announce_ready() -> None:
    """Called by a worker right before it hands control to the library's job loop."""
    sys.stdout.write(READY + "\n")
    sys.stdout.flush()


# -- one peer ------------------------------------------------------------------------------


@dataclass
class Peer:
    """What differs between queue libraries. `prepare` installs the schema and enqueues the
    jobs; `work` is the whole worker process; `states` counts jobs per status over a plain
    psycopg connection."""

    name: str
    version: str
    settings: dict[str, Any]
    prepare: Callable[[Args], Coroutine[Any, Any, None]]
    work: Callable[[Args], Coroutine[Any, Any, None]]
    states: Callable[[psycopg.Connection[Any]], dict[str, int]]
    final: tuple[str, ...]  # statuses a job does not leave
    succeeded: str


def main(peer: Peer, argv: list[str] | None = None) -> int:
    args = parse_args(peer.name, argv)
    if args.worker:
        uvloop.run(peer.work(args))
        return 0
    try:
        report = measure(peer, args, script=Path(sys.argv[0]).resolve())
    except Exception as error:
        sys.stderr.write(f"{peer.name}: {type(error).__name__}: {error}\n")
        return 1
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


def measure(peer: Peer, args: Args, script: Path) -> dict[str, Any]:
    deadline = time.monotonic() + BUDGET_S
    started = time.monotonic()
    uvloop.run(peer.prepare(args))
    enqueue_s = time.monotonic() - started
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        queued = sum(peer.states(conn).values())
        if queued != args.jobs:
            raise RuntimeError(f"enqueued {queued} jobs, expected {args.jobs}")
        sink_before = sink_count(args.stats)
        spawned = time.monotonic()
        with worker_process(script, args) as (process, log):
            ready = wait_ready(process, log, deadline)
            done, states = drain(
                lambda: peer.states(conn), peer.final, args.jobs, deadline, process, log
            )
    elapsed = done - ready
    received = sink_count(args.stats) - sink_before if args.stats else None
    check(peer, args, states, received)
    return {
        "peer": peer.name,
        "version": peer.version,
        "jobs": args.jobs,
        "elapsed_s": round(elapsed, 3),
        "jobs_per_s": round(args.jobs / elapsed, 1),
        "settings": peer.settings,
        "states": states,
        "sink_received": received,
        "enqueue_s": round(enqueue_s, 3),
        "startup_s": round(ready - spawned, 3),
        "timing": f"from the worker saying '{READY}' (after its connections and HTTP session "
        f"are open) to all jobs in a final status, polled every {POLL_S} s",
    }


def check(peer: Peer, args: Args, states: dict[str, int], received: int | None) -> None:
    if states.get(peer.succeeded, 0) != args.jobs:
        raise RuntimeError(f"not every job succeeded: {states}")
    if received is not None and received != args.jobs:
        raise RuntimeError(f"the sink received {received} POSTs for {args.jobs} jobs")


def sink_count(stats_url: str | None) -> int:
    if not stats_url:
        return 0
    with urllib.request.urlopen(stats_url, timeout=10) as r:
        return int(json.load(r)["count"])


# -- the worker process --------------------------------------------------------------------


@contextlib.contextmanager
def worker_process(script: Path, args: Args) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """The worker in its own process, as `tidings worker` is, its stderr in a temp file so a
    failure can show it. Stopped with SIGTERM, which both libraries treat as a clean stop."""
    command = [sys.executable, str(script), "--worker", "--dsn", args.dsn, "--sink", args.sink]
    fd, name = tempfile.mkstemp(prefix="peer-worker-", suffix=".log")
    log = Path(name)
    with os.fdopen(fd, "wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, cwd=script.parent)
    try:
        yield process, log
    finally:
        stop(process)
        log.unlink(missing_ok=True)


def stop(process: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


def wait_ready(process: subprocess.Popen[bytes], log: Path, deadline: float) -> float:
    """The moment the worker printed READY. select() so a hung worker cannot hang us."""
    assert process.stdout is not None
    limit = min(deadline, time.monotonic() + 60)
    while time.monotonic() < limit:
        readable, _, _ = select.select([process.stdout], [], [], 0.05)
        if readable:
            line = process.stdout.readline().decode().strip()
            if line == READY:
                return time.monotonic()
            if not line and process.poll() is not None:
                break
    raise RuntimeError(f"worker did not get ready (exit {process.poll()}):\n{_tail(log)}")


def drain(
    states: Callable[[], dict[str, int]],
    final: tuple[str, ...],
    total: int,
    deadline: float,
    process: subprocess.Popen[bytes],
    log: Path,
) -> tuple[float, dict[str, int]]:
    """Poll until `total` jobs are in a final status; the time of the poll that saw it."""
    while True:
        seen = states()
        if sum(seen.get(s, 0) for s in final) >= total:
            return time.monotonic(), seen
        if process.poll() is not None:  # a dead worker would otherwise cost the whole budget
            raise RuntimeError(f"worker exited ({process.returncode}) at {seen}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{total} jobs not done within {BUDGET_S:.0f} s: {seen}")
        time.sleep(POLL_S)
