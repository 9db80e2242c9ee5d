"""The processes a scenario runs beside itself: the sink (bench/sink.py), `tidings worker`s
and `tidings serve`, each started, waited for and stopped here. Imports no scenario."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def stop(process: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    """SIGTERM, which every process here treats as a clean stop; SIGKILL if that hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(check: Callable[[], bool], timeout_s: float, interval_s: float, what: str) -> float:
    """Poll `check` until it holds; the monotonic time it first did."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval_s)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tidings_env(db_url: str, **settings: object) -> dict[str, str]:
    """The environment of a tidings process: its database, the sink's loopback address
    allowed as a target, and `settings` as TIDINGS_<NAME> variables."""
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


class Sink:
    """The receiver in its own process (bench/sink.py), and a client for its routes."""

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
        stop(self.process)


@dataclass
class Worker:
    """One `tidings worker` process, its output in `log`."""

    process: subprocess.Popen[bytes]
    log: Path
    worker_id: str
    spawned_at: float
    ready_at: float = 0.0

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_started(self, timeout_s: float = 30) -> float:
        """The monotonic time the worker logged that its dispatcher started: a drain is
        timed from there, so the worker's start-up is not part of it."""
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
        """VmHWM, read before the worker stops (it is gone from /proc after)."""
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def stop(self) -> None:
        stop(self.process)


def _spawn_worker(tmp: Path, db_url: str, worker_id: str, settings: dict[str, object]) -> Worker:
    log = tmp / f"{worker_id}-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tidings", "worker", "--id", worker_id],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=tidings_env(db_url, **settings),
            cwd=tmp,
        )
    return Worker(process, log, worker_id, time.monotonic())


@contextlib.contextmanager
def workers(tmp: Path, db_url: str, count: int, **settings: object) -> Iterator[list[Worker]]:
    """`count` workers (bench-0, bench-1, …) on `db_url`, stopped on the way out."""
    started: list[Worker] = []
    try:
        for i in range(count):
            started.append(_spawn_worker(tmp, db_url, f"bench-{i}", settings))
        yield started
    finally:
        for worker in started:
            worker.stop()


@contextlib.contextmanager
def serving(tmp: Path, db_url: str, port: int, **settings: object) -> Iterator[str]:
    """`tidings serve --no-dispatch` on `port`, its base URL once /healthz answers 200."""
    with served(tmp, db_url, port, **settings) as (base, _process):
        yield base


@contextlib.contextmanager
def served(
    tmp: Path, db_url: str, port: int, **settings: object
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """As `serving`, with the process too (to read its CPU time)."""
    log = tmp / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen(
            [sys.executable, "-m", "tidings", "serve", "--no-dispatch"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp,
            env=tidings_env(db_url, port=port, **settings),
        )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if serve.poll() is not None:
            raise RuntimeError(f"serve exited:\n{log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
        return False

    try:
        wait_until(healthy, 30, 0.1, "tidings serve")
        yield base, serve
    finally:
        stop(serve)
