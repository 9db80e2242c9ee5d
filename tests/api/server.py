"""A real `tidings serve` process on a free port, for tests that go through the network."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    base_url: str
    token: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout_s: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(workdir: Path, db_url: str | None = None, *args: str, **settings: str) -> Served:
    port = free_port()
    env = dict(os.environ)
    env.update(
        {
            "TIDINGS_DB": db_url or f"sqlite:///{workdir / 'tidings.db'}",
            "TIDINGS_PORT": str(port),
            "TIDINGS_POLL_INTERVAL_S": "10",
            "TIDINGS_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
        }
    )
    env.update(settings)
    log = workdir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tidings", "serve", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
        )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited:\n{log.read_text()}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    else:
        process.kill()
        raise AssertionError(f"serve did not answer:\n{log.read_text()}")
    tokens = [line for line in log.read_text().splitlines() if line.startswith("tdg_")]
    return Served(process, base_url, tokens[-1] if tokens else "", log)
