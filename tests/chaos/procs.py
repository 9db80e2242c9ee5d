"""The suite's processes: the receiver, `tidings worker` and `tidings serve`, each a real
process with its output in a log file, started and signalled by the harness."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

FAKETIME_LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
)


#: The longest a `worker` or `serve` may take to start: they wait for their database.
DISPATCHER_START_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def faketime_lib() -> str | None:
    return next((lib for lib in FAKETIME_LIBS if os.path.exists(lib)), None)


@dataclass
class Proc:
    """One child process; `logs` keeps every log file it ever wrote (restarts append)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    workdir: Path
    ready_text: str
    #: Polled instead of the log when set (an HTTP server without a line to wait for).
    ready_url: str | None = None
    #: How long a start may take (a dispatcher waits for a database that cannot be reached).
    start_timeout_s: float = 30.0
    process: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)

    def start(self) -> None:
        timeout_s = self.start_timeout_s
        log = self.workdir / f"{self.name}.{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._ready(log):
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.output()}")
            time.sleep(0.05)
        # Not left running: a late start would be a worker nobody stops or counts.
        self.kill()
        raise RuntimeError(f"{self.name} did not start within {timeout_s:.0f} s:\n{self.output()}")

    def _ready(self, log: Path) -> bool:
        if self.ready_url is None:
            return self.ready_text in log.read_text(errors="replace")
        try:
            with urllib.request.urlopen(self.ready_url, timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int | None:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (after SIGCONT, in case it is stopped), then SIGKILL."""
        if not self.alive:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        if self.wait(timeout_s) is None:
            self.kill()

    def output(self) -> str:
        return "\n".join(log.read_text(errors="replace") for log in self.logs if log.exists())


def _env(extra_env: dict[str, str] | None = None, **settings: object) -> dict[str, str]:
    env = {**os.environ, **(extra_env or {})}
    env.update({f"TIDINGS_{k.upper()}": str(v) for k, v in settings.items() if v is not None})
    return env


def worker(
    workdir: Path,
    db_url: str,
    worker_id: str,
    skew_s: float = 0,
    extra_env: dict[str, str] | None = None,
    **settings: object,
) -> Proc:
    """A `tidings worker`; with `skew_s` its wall clock runs that far ahead (libfaketime)."""
    env = _env(extra_env, db=db_url, **settings)
    if skew_s:
        lib = faketime_lib()
        if lib is None:
            raise RuntimeError("libfaketime is not installed (apt-get install faketime)")
        env.update(LD_PRELOAD=lib, FAKETIME=f"{skew_s:+.0f}", FAKETIME_DONT_FAKE_MONOTONIC="1")
    argv = [sys.executable, "-m", "tidings", "worker", "--id", worker_id]
    ready = f"dispatcher {worker_id} started on"
    return Proc(worker_id, argv, env, workdir, ready, start_timeout_s=DISPATCHER_START_S)


def serve(
    workdir: Path,
    db_url: str,
    port: int,
    name: str = "serve",
    dispatch: bool = True,
    extra_env: dict[str, str] | None = None,
    **settings: object,
) -> Proc:
    """`tidings serve`: the API, and a dispatcher unless `dispatch` is False."""
    env = _env(extra_env, db=db_url, port=port, worker_id=name, **settings)
    argv = [sys.executable, "-m", "tidings", "serve", "--dispatch" if dispatch else "--no-dispatch"]
    url = f"http://127.0.0.1:{port}/healthz"
    return Proc(name, argv, env, workdir, "", ready_url=url, start_timeout_s=DISPATCHER_START_S)


def receiver(
    workdir: Path,
    port: int,
    record: Path,
    secrets: dict[str, str],
    tls: tuple[int, Path] | None = None,
) -> Proc:
    """The receiver; with `tls` (port, directory of tests/chaos/tls.py) also over TLS."""
    argv = [
        sys.executable,
        "-m",
        "tests.chaos.receiver",
        "--port",
        str(port),
        "--record",
        str(record),
        "--secrets",
        json.dumps(secrets),
    ]
    if tls is not None:
        argv += ["--tls-port", str(tls[0]), "--tls-dir", str(tls[1])]
    return Proc("receiver", argv, dict(os.environ), workdir, f"listening on {port}")


def control(port: int, mode: str, path: str | None = None) -> None:
    """Tell the receiver how to answer from now on."""
    body = json.dumps({"mode": mode, "path": path}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/_control", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
