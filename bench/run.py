"""The benchmark driver: starts a sink process and PostgreSQL databases, runs the scenarios,
prints a table and writes bench/results/latest.json. Nothing here asserts speed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.peers.scenario import scenario_peers
from bench.result import Counts, Result

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


# -- processes -----------------------------------------------------------------------------


class Sink:
    """The receiver in its own process (bench/sink.py)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.sink"], stdout=subprocess.PIPE, cwd=ROOT
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line:
            raise RuntimeError("sink did not start")
        self.port = int(line)
        self.base = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(timeout=10)

    def url(self, path: str) -> str:
        return self.base + path

    def stats(self) -> dict[str, Any]:
        return dict(self.client.get(self.url("/stats")).json())

    def reset(self) -> None:
        self.client.post(self.url("/reset")).raise_for_status()

    def wait_for(self, count: int, timeout_s: float) -> int:
        """Block until the sink has counted `count` messages (a long poll, so waiting loads
        nothing); answers the count reached, lower if `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        reached = 0
        while time.monotonic() < deadline:
            chunk = min(30.0, max(0.1, deadline - time.monotonic()))
            answer = self.client.get(
                self.url("/wait"), params={"count": count, "timeout": chunk}, timeout=chunk + 10
            )
            reached = int(answer.json()["count"])
            if reached >= count:
                break
        return reached

    def stop(self) -> None:
        self.client.close()
        _stop(self.process)


def _stop(process: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tidings_env(db_url: str, **settings: object) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "TIDINGS_DB": db_url,
            "TIDINGS_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
            "TIDINGS_GRACE_S": "5",
        }
    )
    env.update({f"TIDINGS_{k.upper()}": str(v) for k, v in settings.items()})
    return env


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path
    worker_id: str
    spawned_at: float
    ready_at: float = 0.0

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_started(self, timeout_s: float = 30) -> float:
        deadline = time.monotonic() + timeout_s
        needle = f"dispatcher {self.worker_id} started on"
        while time.monotonic() < deadline:
            if needle in self.output():
                self.ready_at = time.monotonic()
                return self.ready_at
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited at start:\n{self.output()[-2000:]}")
            time.sleep(0.01)
        raise RuntimeError(f"worker did not start:\n{self.output()[-2000:]}")

    def peak_rss_kib(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def stop(self) -> None:
        _stop(self.process)


@contextlib.contextmanager
def workers(tmp: Path, db_url: str, count: int, **settings: object) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    try:
        for i in range(count):
            worker_id = f"bench-{i}"
            log = tmp / f"{worker_id}-{time.monotonic_ns()}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "tidings", "worker", "--id", worker_id],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_tidings_env(db_url, **settings),
                    cwd=tmp,
                )
            started.append(Worker(process, log, worker_id, time.monotonic()))
        yield started
    finally:
        for worker in started:
            worker.stop()


# -- databases -----------------------------------------------------------------------------


class Postgres:
    def __init__(self) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.pg import find_server

        server, where = find_server()
        if server is None:
            raise RuntimeError(where)
        self.server = server
        self.where = where
        self.created: list[str] = []
        with server.admin() as conn:
            row = conn.execute("SHOW server_version").fetchone()
            self.version = str(row[0]) if row else "?"

    @contextlib.contextmanager
    def database(self) -> Iterator[tuple[str, str]]:
        name = self.server.create_database("tidings_bench")
        self.created.append(name)
        try:
            yield name, self.server.url(name)
        finally:
            self.server.drop_database(name)
            self.created.remove(name)

    def drop_all(self) -> None:
        for name in list(self.created):
            with contextlib.suppress(Exception):
                self.server.drop_database(name)

    def connect(self, name: str) -> psycopg.Connection[Any]:
        s = self.server
        return psycopg.connect(host=s.host, port=s.port, user=s.user, dbname=name, autocommit=True)


# -- helpers -------------------------------------------------------------------------------


def _event(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "bench.event",
        "subject": f"host-{i % 97}",
        "severity": "high",
        "title": f"bench event {i}: something happened on host-{i % 97}",
        "body": "A benchmark event with a short body of typical length for an alert.",
        "data": {"i": i, **extra},
    }


async def _publish_all(url: str, events: list[dict[str, Any]], batch: int = 1000) -> None:
    import tidings

    async with tidings.Hub(url) as hub:
        for start in range(0, len(events), batch):
            await hub.publish_many(events[start : start + batch])


async def _setup(url: str, channels: list[dict[str, Any]]) -> None:
    import tidings

    async with tidings.Hub(url) as hub:
        await hub.migrate()
        for spec in channels:
            await hub.channels.create(**spec)


def _webhook(name: str, url: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "webhook",
        "config": {"url": url},
        "rate_per_min": 0,
        "timeout_s": 10,
        "retry_backoff_s": 0.05,
    } | fields


def _wait_until(check: Callable[[], bool], timeout_s: float, interval_s: float, what: str) -> float:
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval_s)


def _states_pg(pg: Postgres, name: str) -> Callable[[], dict[str, int]]:
    conn = pg.connect(name)

    def states() -> dict[str, int]:
        rows = conn.execute("SELECT state, count(*) FROM deliveries GROUP BY state").fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    return states


def _states_sqlite(path: Path) -> Callable[[], dict[str, int]]:
    def states() -> dict[str, int]:
        conn = sqlite3.connect(path, timeout=30)
        try:
            rows = conn.execute("SELECT state, count(*) FROM deliveries GROUP BY state").fetchall()
        finally:
            conn.close()
        return {str(r[0]): int(r[1]) for r in rows}

    return states


FINAL = ("sent", "failed", "skipped")


def _drain(
    states: Callable[[], dict[str, int]], total: int, timeout_s: float, interval_s: float = 0.25
) -> tuple[float, dict[str, int]]:
    seen: dict[str, int] = {}

    def done() -> bool:
        nonlocal seen
        seen = states()
        return sum(seen.get(s, 0) for s in FINAL) >= total

    at = _wait_until(done, timeout_s, interval_s, f"{total} deliveries to settle")
    return at, seen


# -- scenario 1: raw -----------------------------------------------------------------------


async def _raw(dsn: str, sink_url: str, n: int) -> float:
    import aiohttp
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE raw_deliveries (id bigserial PRIMARY KEY, state text NOT NULL,"
            " attempts int NOT NULL DEFAULT 0, payload text NOT NULL, sent_at timestamptz)"
        )
        payload = json.dumps({"type": "event", "event": _event(0)})
        await conn.execute(
            "INSERT INTO raw_deliveries (state, payload) "
            "SELECT 'pending', $1 FROM generate_series(1, $2)",
            payload,
            n,
        )
        await conn.execute("ANALYZE raw_deliveries")
        claim = await conn.prepare(
            "WITH picked AS MATERIALIZED (SELECT id FROM raw_deliveries WHERE state='pending'"
            " ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED)"
            " UPDATE raw_deliveries r SET state='sending', attempts=r.attempts+1"
            " FROM picked WHERE r.id = picked.id RETURNING r.id, r.payload"
        )
        finish = await conn.prepare(
            "UPDATE raw_deliveries SET state='sent', sent_at=now() WHERE id = ANY($1::bigint[])"
        )
        slots = asyncio.Semaphore(50)
        connector = aiohttp.TCPConnector(limit=50)
        async with aiohttp.ClientSession(connector=connector) as http:

            async def post(body: str) -> None:
                async with (
                    slots,
                    http.post(
                        sink_url, data=body.encode(), headers={"content-type": "application/json"}
                    ) as r,
                ):
                    await r.read()
                    r.raise_for_status()

            started = time.perf_counter()
            while True:
                rows = await claim.fetch()
                if not rows:
                    break
                await asyncio.gather(*(post(r["payload"]) for r in rows))
                await finish.fetch([r["id"] for r in rows])
            elapsed = time.perf_counter() - started
        sent = await conn.fetchval("SELECT count(*) FROM raw_deliveries WHERE state='sent'")
        if sent != n:
            raise RuntimeError(f"raw: {sent} of {n} sent")
        return n / elapsed
    finally:
        await conn.close()


def raw_once(pg: Postgres, sink: Sink, n: int) -> float:
    """One run of the baseline loop on a fresh database (deliveries/s)."""
    import uvloop

    with pg.database() as (_name, url):
        return uvloop.run(_raw(url, sink.url("/hook"), n))


def scenario_raw(pg: Postgres, sink: Sink, c: Counts) -> list[Result]:
    before = sink.stats()["count"]
    rate = raw_once(pg, sink, c.raw)
    received = sink.stats()["count"] - before
    return [
        Result(
            "raw",
            rate,
            "deliveries/s",
            "postgresql",
            notes={"rows": c.raw, "sink_received": received},
        )
    ]


# -- scenario 2: e2e -----------------------------------------------------------------------


def _run_e2e(
    tmp: Path,
    db_url: str,
    states: Callable[[], dict[str, int]],
    channels: int,
    events: int,
    total: int,
    processes: int,
    sink: Sink,
    timeout_s: float,
    before_start: Callable[[], None] | None = None,
    after_done: Callable[[], None] | None = None,
) -> tuple[float, dict[str, Any]]:
    specs = [_webhook(f"hook-{i}", sink.url("/hook")) for i in range(channels)]
    asyncio.run(_setup(db_url, specs))
    t_pub = time.monotonic()
    asyncio.run(_publish_all(db_url, [_event(i) for i in range(events)]))
    publish_s = time.monotonic() - t_pub
    pending = states()
    if sum(pending.values()) != total:
        raise RuntimeError(f"expected {total} deliveries, found {pending}")
    sink_before = sink.stats()["count"]
    if before_start:
        before_start()
    with workers(tmp, db_url, processes, poll_interval_s=1, lease_s=120) as started:
        ready = [w.wait_started() for w in started]
        t0 = min(ready)
        # Wait on the sink first, then poll the database only for the last outcomes: counting
        # every row's state all along would load the database being measured.
        sink.wait_for(sink_before + total, timeout_s)
        done_at, final = _drain(states, total, timeout_s, interval_s=0.01)
        if after_done:
            after_done()
        rss = [w.peak_rss_kib() for w in started]
        spawn_to_ready = max(r - w.spawned_at for r, w in zip(ready, started, strict=True))
    elapsed = done_at - t0
    if final.get("sent", 0) != total:
        raise RuntimeError(f"not every delivery was sent: {final}")
    received = sink.stats()["count"] - sink_before
    return total / elapsed, {
        "deliveries": total,
        "events": events,
        "channels": channels,
        "processes": processes,
        "drain_s": round(elapsed, 3),
        "startup_s": round(spawn_to_ready, 3),
        "publish_s": round(publish_s, 3),
        "sink_received": received,
        "worker_peak_rss_mib": [round(r / 1024, 1) if r else None for r in rss],
        "timing": "from the worker logging 'dispatcher … started' to all rows sent "
        "(the sink's count waited for, then the rows' states polled every 10 ms)",
    }


def scenario_e2e(
    pg: Postgres, sink: Sink, c: Counts, tmp: Path, rounds: int, raws: list[float]
) -> list[Result]:
    """Each variant runs `rounds` times, each run right after a run of `raw`: its ratio is
    the median of the paired ratios, so a machine that slows down or speeds up during the
    bench (shared, noisy) moves both sides of each ratio alike. `raws` collects the baseline
    runs for the table's `raw` row."""
    out: list[Result] = []
    variants: list[tuple[str, str, int, int]] = [
        ("e2e/pg-1proc", "postgresql", 1, 1),
        ("e2e/pg-2proc", "postgresql", 2, 1),
        ("e2e/sqlite-1proc", "sqlite", 1, 1),
        ("e2e/pg-1proc-100ch", "postgresql", 1, 100),
    ]
    for name, backend, processes, channels in variants:
        events = c.e2e // channels
        total = events * channels
        runs: list[tuple[float, float, dict[str, Any]]] = []
        try:
            for _ in range(rounds):
                raw = raw_once(pg, sink, c.raw)
                raws.append(raw)
                rate, notes = _e2e_once(tmp, pg, sink, backend, channels, events, total, processes)
                runs.append((rate, raw, notes))
                print(f"  {name}: {rate:,.0f}/s, raw {raw:,.0f}/s", flush=True)
            ratios = [rate / raw for rate, raw, _ in runs]
            notes = dict(runs[-1][2])
            notes.pop("drain_s", None)
            notes["runs"] = [
                {"rate": round(rate), "raw": round(raw), "drain_s": n["drain_s"]}
                for rate, raw, n in runs
            ]
            result = Result(
                name,
                statistics.median(rate for rate, _, _ in runs),
                "deliveries/s",
                backend,
                ratio_to_raw=statistics.median(ratios),
                notes=notes,
            )
            out.append(result)
        except Exception as error:  # report and carry on with the next variant
            out.append(Result(name, None, "deliveries/s", backend, error=repr(error)))
            print(f"  {name}: {error!r}", flush=True)
    return out


def _e2e_once(
    tmp: Path,
    pg: Postgres,
    sink: Sink,
    backend: str,
    channels: int,
    events: int,
    total: int,
    processes: int,
) -> tuple[float, dict[str, Any]]:
    timeout = 600
    if backend == "postgresql":
        with pg.database() as (dbname, url):
            states = _states_pg(pg, dbname)
            return _run_e2e(tmp, url, states, channels, events, total, processes, sink, timeout)
    path = tmp / f"e2e-{time.monotonic_ns()}.db"
    return _run_e2e(
        tmp,
        f"sqlite:///{path}",
        _states_sqlite(path),
        channels,
        events,
        total,
        processes,
        sink,
        timeout,
    )


# -- scenario 3: publish -------------------------------------------------------------------


async def _publish_http(base: str, token: str, n: int, concurrency: int) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    counter = iter(range(n))
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:

        async def lane() -> None:
            for i in counter:
                r = await client.post("/v1/events", json=_event(i))
                if r.status_code != 201:
                    raise RuntimeError(f"publish answered {r.status_code}: {r.text[:200]}")

        await client.post("/v1/events", json=_event(-1))  # warm-up (connection, caches)
        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        return n / (time.perf_counter() - started)


async def _publish_lib(url: str, n: int) -> float:
    import tidings

    async with tidings.Hub(url) as hub:
        await hub.publish(**_event(-1))  # warm-up
        started = time.perf_counter()
        for i in range(n):
            await hub.publish(**_event(i))
        return n / (time.perf_counter() - started)


def _publish_batches(url: str, batches: int, settle: bool) -> float:
    """Batches of 1,000 in a fresh process (bench/publish_batches.py)."""
    args = [sys.executable, "-m", "bench.publish_batches", url, str(batches)]
    done = subprocess.run(
        [*args, "--settle"] if settle else args,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return float(done.stdout.strip().splitlines()[-1])


def scenario_publish(pg: Postgres, sink: Sink, c: Counts, tmp: Path) -> list[Result]:
    out: list[Result] = []
    with pg.database() as (_name, url):
        asyncio.run(_setup(url, [_webhook("hook", sink.url("/hook"))]))
        made = subprocess.run(
            [
                sys.executable,
                "-m",
                "tidings",
                "token",
                "create",
                "--name",
                "bench",
                "--scope",
                "publish",
                "--db",
                url,
            ],
            capture_output=True,
            text=True,
            check=True,
            env=_tidings_env(url),
            cwd=tmp,
        )
        token = made.stdout.strip().splitlines()[-1]
        port = _free_port()
        log = tmp / "serve.log"
        with log.open("wb") as sout:
            serve = subprocess.Popen(
                [sys.executable, "-m", "tidings", "serve", "--no-dispatch"],
                stdout=sout,
                stderr=subprocess.STDOUT,
                cwd=tmp,
                env=_tidings_env(url, port=port, poll_interval_s=10),
            )
        try:
            base = f"http://127.0.0.1:{port}"

            def healthy() -> bool:
                if serve.poll() is not None:
                    raise RuntimeError(f"serve exited:\n{log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
                return False

            _wait_until(healthy, 30, 0.1, "tidings serve")
            for concurrency in (1, 4):
                rate = asyncio.run(_publish_http(base, token, c.publish_single, concurrency))
                out.append(
                    Result(
                        f"publish/http-single-c{concurrency}",
                        rate,
                        "events/s",
                        "postgresql",
                        notes={
                            "events": c.publish_single,
                            "concurrency": concurrency,
                            "fan_out": 1,
                        },
                    )
                )
        finally:
            _stop(serve)
        single = asyncio.run(_publish_lib(url, c.publish_single))
        out.append(
            Result(
                "publish/lib-single",
                single,
                "events/s",
                "postgresql",
                notes={"events": c.publish_single, "sequential": True, "fan_out": 1},
            )
        )
        for name, settle in (("", False), ("-settled", True)):
            out.append(
                Result(
                    f"publish/lib-batch-1000{name}",
                    _publish_batches(url, c.publish_batches, settle),
                    "events/s",
                    "postgresql",
                    notes={
                        "batches": c.publish_batches,
                        "fan_out": 1,
                        "process": "fresh",
                        "settle_heap": settle,
                    },
                )
            )
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- scenario 4: latency -------------------------------------------------------------------


async def _latency_publish(url: str, sink: Sink, n: int) -> None:
    import tidings

    async with httpx.AsyncClient(timeout=20) as client, tidings.Hub(url) as hub:
        for i in range(n):
            # The receipt is waited for with a long poll: polling the sink would load the
            # very processes whose latency is measured.
            arrived = asyncio.create_task(
                client.get(sink.url("/wait"), params={"count": i + 1, "timeout": 15})
            )
            await asyncio.sleep(0.002)  # the long poll is in place before the publish
            await hub.publish(**_event(i, t=time.time()))
            if int((await arrived).json()["count"]) < i + 1:
                raise TimeoutError(f"event {i} did not arrive within 15 s")
            await asyncio.sleep(0.05)  # idle gap between events


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def scenario_latency(pg: Postgres, sink: Sink, c: Counts, tmp: Path) -> list[Result]:
    with pg.database() as (_name, url):
        asyncio.run(_setup(url, [_webhook("lat", sink.url("/lat"))]))
        with workers(tmp, url, 1, poll_interval_s=10, lease_s=120) as started:
            started[0].wait_started()
            time.sleep(0.5)
            sink.reset()
            asyncio.run(_latency_publish(url, sink, c.latency))
            lat = [x * 1000 for x in sink.stats()["latencies"]]
    notes = {
        "events": len(lat),
        "poll_interval_s": 10,
        "mean_ms": round(statistics.mean(lat), 2),
        "max_ms": round(max(lat), 2),
        "clock": "time.time() on both sides, same machine",
    }
    return [
        Result("latency/p50", _pct(lat, 0.50), "ms", "postgresql", notes=notes),
        Result("latency/p99", _pct(lat, 0.99), "ms", "postgresql", notes=notes),
    ]


# -- scenario 5: digest --------------------------------------------------------------------


def scenario_digest(pg: Postgres, sink: Sink, c: Counts, tmp: Path) -> list[Result]:
    with pg.database() as (name, url):
        spec = {
            "name": "wecom-digest",
            "kind": "wecom",
            "config": {"webhook_url": sink.url("/cgi-bin/webhook/send?key=bench")},
            "mode": "digest",
            "digest_period_s": 0.2,
            "rate_per_min": 0,
            "timeout_s": 10,
            "retry_backoff_s": 0.05,
        }
        asyncio.run(_setup(url, [spec]))
        t_pub = time.monotonic()
        asyncio.run(_publish_all(url, [_event(i) for i in range(c.digest)]))
        publish_s = time.monotonic() - t_pub
        states = _states_pg(pg, name)
        sink.reset()
        with workers(tmp, url, 1, poll_interval_s=1, lease_s=120) as started:
            t0 = started[0].wait_started()
            done_at, final = _drain(states, c.digest, 1800)
            rss = started[0].peak_rss_kib()
        stats = sink.stats()
    elapsed = done_at - t0
    notes = {
        "entries": c.digest,
        "final_states": final,
        "messages_accepted": stats["count"],
        "messages_rejected_40058": stats["rejected"],
        "publish_s": round(publish_s, 2),
        "entries_per_s": round(c.digest / elapsed, 1),
        "limit_bytes": 4096,
        "digest_period_s": 0.2,
    }
    out = [
        Result("digest/drain", elapsed, "s", "postgresql", notes=notes),
        Result(
            "digest/worker-peak-rss",
            (rss or 0) / 1024 if rss else None,
            "MiB (VmHWM)",
            "postgresql",
            notes={"entries": c.digest},
        ),
    ]
    if final.get("sent", 0) != c.digest:
        out[0].error = f"not every entry was sent: {final}"
    return out


# -- scenario 6: round trips ---------------------------------------------------------------


def scenario_roundtrips(pg: Postgres, sink: Sink, c: Counts, tmp: Path) -> list[Result]:
    """Transactions committed (+ rolled back) on the benchmark database per delivered message,
    from pg_stat_database, during a 1-process e2e drain. The bench's own polling
    transactions are counted and subtracted. pg_stat_statements is not preloaded here."""
    with pg.database() as (name, url):
        probe = pg.connect(name)
        polls = 0

        def xacts() -> int:
            # Force a fresh snapshot of the cumulative statistics.
            probe.execute("SELECT pg_stat_clear_snapshot()")
            row = probe.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                (name,),
            ).fetchone()
            return int(row[0]) if row else 0

        base_states = _states_pg(pg, name)

        def states() -> dict[str, int]:
            nonlocal polls
            polls += 1
            return base_states()

        marks: dict[str, int] = {}

        def before() -> None:
            time.sleep(1.2)  # let backends flush their pending stats (PG 15: ≤ 1 s)
            marks["before"] = xacts()
            marks["polls_before"] = polls

        n = max(1000, c.e2e // 4)
        rate, _notes = _run_e2e(tmp, url, states, 1, n, n, 1, sink, 600, before_start=before)
        # workers are stopped now (their stats flushed on exit); wait for the flush
        time.sleep(1.2)
        after = xacts()
        # each xacts() call and each poll is one autocommit transaction of ours
        ours = (polls - marks["polls_before"]) + 2  # polls + the two SELECTs of xacts()
        # pg_stat_clear_snapshot() is its own statement/transaction too
        ours += 2
        worker_xacts = after - marks["before"] - ours
        per = worker_xacts / n
    trips, counted = _count_round_trips(pg, sink, n)
    return [
        Result(
            "roundtrips",
            trips / n,
            "round trips per delivered message",
            "postgresql",
            notes={
                "deliveries": n,
                **counted,
                "method": "an in-process dispatcher drains the rows while SQLAlchemy's events "
                "count every statement, BEGIN and COMMIT it sends (each one round trip; "
                "prepares of a statement new to a connection are not counted, nor BEGIN and "
                "COMMIT in autocommit, which are not sent)",
            },
        ),
        Result(
            "roundtrips/transactions",
            per,
            "transactions per delivered message",
            "postgresql",
            notes={
                "deliveries": n,
                "worker_transactions": worker_xacts,
                "bench_transactions_subtracted": ours,
                "method": "pg_stat_database.xact_commit+xact_rollback before/after a "
                "1-process drain (includes worker start-up and shutdown)",
                "e2e_rate": round(rate, 1),
            },
        ),
    ]


def _count_round_trips(pg: Postgres, sink: Sink, n: int) -> tuple[int, dict[str, int]]:
    """Drain `n` deliveries with a dispatcher in this process, counting what it sends."""
    import ipaddress

    import uvloop
    from sqlalchemy import event

    import tidings
    from tidings.channels.registry import Registry, builtin_adapters
    from tidings.dispatch.dispatcher import Dispatcher, DispatcherConfig

    counts = {"statements": 0, "begins": 0, "commits": 0, "rollbacks": 0}

    def counter(key: str) -> Callable[..., None]:
        def count(conn: Any, *_args: Any, **_kw: Any) -> None:
            # In autocommit (the store's reads and one-statement writes) SQLAlchemy still
            # reports begin and commit, but sends neither.
            level = conn.get_execution_options().get("isolation_level")
            if key == "statements" or level != "AUTOCOMMIT":
                counts[key] += 1

        return count

    async def drain(url: str, name: str) -> None:
        async with tidings.Hub(url) as hub:
            engine = hub.store.sync_engine
            for key, name_ in (
                ("statements", "before_cursor_execute"),
                ("begins", "begin"),
                ("commits", "commit"),
                ("rollbacks", "rollback"),
            ):
                event.listen(engine, name_, counter(key))
            config = DispatcherConfig(
                worker_id="bench-roundtrips",
                lease_s=120,
                poll_interval_s=1,
                allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
            )
            dispatcher = Dispatcher(hub.store, Registry(builtin_adapters()), config)
            task = asyncio.create_task(dispatcher.run())
            states = _states_pg(pg, name)
            await asyncio.to_thread(_drain, states, n, 600, 0.05)
            dispatcher.stop()
            await task

    with pg.database() as (name, url):
        asyncio.run(_setup(url, [_webhook("hook-0", sink.url("/hook"))]))
        asyncio.run(_publish_all(url, [_event(i) for i in range(n)]))
        uvloop.run(drain(url, name))
    return sum(counts.values()), counts


# -- driver --------------------------------------------------------------------------------


def machine(pg: Postgres | None) -> dict[str, Any]:
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "postgresql": pg.version if pg else None,
        "postgresql_from": pg.where if pg else None,
        "platform": platform.platform(),
    }


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


def print_table(results: list[Result]) -> None:
    rows = [("scenario", "figure", "unit", "vs raw", "backend")]
    for r in results:
        ratio = f"{r.ratio_to_raw:.2f}x" if r.ratio_to_raw is not None else ""
        figure = _fmt(r.figure) if r.error is None else f"ERROR: {r.error[:60]}"
        rows.append((r.name, figure, r.unit, ratio, r.backend))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for k, row in enumerate(rows):
        print(
            "  ".join(
                cell.ljust(widths[i]) if i != 1 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            )
        )
        if k == 0:
            print("  ".join("-" * w for w in widths))


def _raw_row(results: list[Result], paired: list[float]) -> float | None:
    """The `raw` row shows the median of every baseline run (the first and the paired
    ones); a figure without a paired ratio (the peers) is taken against it."""
    row = next((r for r in results if r.name == "raw" and r.figure), None)
    if row is None or row.figure is None:
        return None
    runs = [row.figure, *paired]
    row.figure = statistics.median(runs)
    row.notes["runs"] = [round(x) for x in runs]
    return row.figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small counts (~1 minute)")
    parser.add_argument("--only", default="", help="comma-separated scenarios to run")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="runs of each e2e variant, each paired with a run of raw (default 3, quick 1)",
    )
    args = parser.parse_args(argv)
    counts = Counts.make(args.quick)
    only = {s for s in args.only.split(",") if s}
    rounds = args.rounds or (1 if args.quick else 3)
    raws: list[float] = []
    results: list[Result] = []
    pg: Postgres | None = None
    sink: Sink | None = None
    began = time.monotonic()
    try:
        pg = Postgres()
        sink = Sink()
        print(f"bench: {pg.where}, PostgreSQL {pg.version}; sink on port {sink.port}", flush=True)
        with tempfile.TemporaryDirectory(prefix="tidings-bench-") as tmpdir:
            tmp = Path(tmpdir)
            scenarios: list[tuple[str, Callable[[], list[Result]]]] = [
                ("raw", lambda: scenario_raw(pg, sink, counts)),
                ("e2e", lambda: scenario_e2e(pg, sink, counts, tmp, rounds, raws)),
                ("publish", lambda: scenario_publish(pg, sink, counts, tmp)),
                ("latency", lambda: scenario_latency(pg, sink, counts, tmp)),
                ("digest", lambda: scenario_digest(pg, sink, counts, tmp)),
                ("roundtrips", lambda: scenario_roundtrips(pg, sink, counts, tmp)),
                ("peers", lambda: scenario_peers(pg, sink, counts)),
            ]
            for name, run in scenarios:
                if only and name not in only:
                    continue
                print(f"bench: {name} …", flush=True)
                t = time.monotonic()
                try:
                    results.extend(run())
                except Exception as error:
                    results.append(Result(name, None, "", "postgresql", error=repr(error)))
                print(f"bench: {name} took {time.monotonic() - t:.1f} s", flush=True)
    finally:
        if sink is not None:
            sink.stop()
        if pg is not None:
            pg.drop_all()
    raw = _raw_row(results, raws)
    for r in results:
        if raw and r.unit == "deliveries/s" and r.figure is not None and r.ratio_to_raw is None:
            r.ratio_to_raw = r.figure / raw
    print()
    print_table(results)
    doc = {
        "quick": args.quick,
        "wall_s": round(time.monotonic() - began, 1),
        "machine": machine(pg),
        "scenarios": [r.as_json() for r in results],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "latest.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}; machine: {json.dumps(doc['machine'])}")
    if args.quick:
        missing = [r.name for r in results if r.figure is None or r.error]
        if missing or not results:
            print(f"bench --quick: no figure for {missing}", file=sys.stderr)
            return 1
    return 0
