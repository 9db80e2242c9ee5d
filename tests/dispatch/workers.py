"""Real `tidings worker` processes for crash, signal and cluster tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int:
        return self.process.wait(timeout=timeout_s)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def workers(tmp_path: Path, db_url: str, *ids: str, **settings: object) -> Iterator[list[Worker]]:
    """Start one worker process per id; stop (SIGTERM, then SIGKILL) any still alive after."""
    started: list[Worker] = []
    try:
        for worker_id in ids:  # inside: a worker that fails to start stops those before it
            started.append(spawn(tmp_path, db_url, worker_id, **settings))
        yield started
    finally:
        for worker in started:
            worker.stop()


def spawn(tmp_path: Path, db_url: str, worker_id: str, **settings: object) -> Worker:
    env = dict(os.environ)
    env.update(
        {
            "TIDINGS_DB": db_url,
            "TIDINGS_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
            "TIDINGS_POLL_INTERVAL_S": "0.2",
            "TIDINGS_LEASE_S": "3",
            "TIDINGS_GRACE_S": "2",
        }
    )
    env.update({f"TIDINGS_{k.upper()}": str(v) for k, v in settings.items()})
    log = tmp_path / f"{worker_id}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tidings", "worker", "--id", worker_id],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    worker = Worker(process, log)
    try:
        _wait_started(worker, worker_id)
    except BaseException:
        worker.stop()  # not left running into the tests that follow
        raise
    return worker


def _wait_started(worker: Worker, worker_id: str, timeout_s: float = 60.0) -> None:
    """Until it says it started: a few seconds, longer on a machine that is busy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f"dispatcher {worker_id} started on" in worker.output():
            return
        if worker.process.poll() is not None:
            raise AssertionError(f"worker exited at start:\n{worker.output()}")
        time.sleep(0.05)
    raise AssertionError(f"worker did not start:\n{worker.output()}")
