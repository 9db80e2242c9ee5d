"""A throwaway PostgreSQL cluster the suite starts itself (initdb / pg_ctl, its own port and
temp dir), so it can be restarted and starved without touching the machine's server."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from tests.chaos.procs import free_port

#: Small on purpose: "connection limit exhausted" must be reachable quickly. Yet above what
#: the rig uses at its peak — each worker's pool, LISTEN and own statement connections, a
#: killed worker's replacement beside the backends it left, the publisher's, serve's and the
#: settle loop's — which filled the 37 slots of a limit of 40 once single publishes took
#: their own connection.
MAX_CONNECTIONS = 60
#: The role tidings connects as (its databases' owner, not a superuser).
APP_ROLE = "tidings"
#: The application_name of a worker's LISTEN connection.
LISTEN_APP = "tidings-wakeups"
#: The application_name of the connections that hold the slots while the limit is exhausted.
HOLD_APP = "chaos-hold"


def binaries() -> str | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if not initdb or not os.path.exists(initdb):
        return None
    bindir = os.path.dirname(os.path.realpath(initdb))
    return bindir if os.path.exists(os.path.join(bindir, "pg_ctl")) else None


class Cluster:
    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.workdir = Path(tempfile.mkdtemp(prefix="tidings-chaos-pg-"))
        self.datadir = self.workdir / "data"
        self.port = free_port()
        self._prefix: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            shutil.chown(self.workdir, "postgres")
            self._prefix = ["runuser", "-u", "postgres", "--"]
        self._held: list[psycopg.Connection] = []

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def _ctl(self, *args: str, timeout_s: float = 60) -> None:
        subprocess.run(
            [*self._prefix, os.path.join(self.bindir, "pg_ctl"), "-D", str(self.datadir), *args],
            check=True,
            capture_output=True,
            timeout=timeout_s,
        )

    def start(self) -> None:
        subprocess.run(
            [
                *self._prefix,
                os.path.join(self.bindir, "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        options = (
            f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
            f" -c max_connections={MAX_CONNECTIONS} -c superuser_reserved_connections=3"
        )
        self._ctl("-w", "-l", str(self.workdir / "log"), "-o", options, "start")
        self.wait_ready()

    def wait_ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                time.sleep(0.1)
        raise RuntimeError(f"throwaway PostgreSQL on {self.port} did not come up")

    def create_database(self, name: str, owner: str = APP_ROLE) -> str:
        """A fresh database owned by `owner`, a role that is not a superuser (as tidings runs
        in production): the slots PostgreSQL keeps for superusers stay free for the suite's
        own tools however many connections the dispatchers hold. Its URL, as that role."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if (
                conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [owner]).fetchone()
                is None
            ):
                conn.execute(f'CREATE ROLE "{owner}" LOGIN')
            conn.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        return self.url(name, owner)

    def restart(self, mode: str) -> None:
        """`pg_ctl restart -m fast|immediate`: every connection drops, the server comes back."""
        # -l: otherwise the new postmaster keeps pg_ctl's output pipe open and run() never ends.
        self._ctl("-w", "-l", str(self.workdir / "log"), "-m", mode, "restart")
        self.wait_ready()

    def terminate(self, application_name: str | None = None, database: str | None = None) -> int:
        """pg_terminate_backend of the client connections (of one application_name)."""
        where = (
            "pid <> pg_backend_pid() AND backend_type = 'client backend'"
            f" AND application_name <> '{HOLD_APP}'"
        )
        params: list[str] = []
        if application_name is not None:
            where += " AND application_name = %s"
            params.append(application_name)
        if database is not None:
            where += " AND datname = %s"
            params.append(database)
        with psycopg.connect(self.url(), autocommit=True) as conn:
            row = conn.execute(
                f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE {where}",
                params,
            ).fetchone()
        return int(row[0]) if row else 0

    def exhaust(self) -> int:
        """Drop the clients' connections and take every slot, so their reconnects are refused;
        the slots are held until `release()`. Returns how many were taken."""
        self.terminate()
        while len(self._held) < MAX_CONNECTIONS:
            try:
                conn = psycopg.connect(self.url(), connect_timeout=3, application_name=HOLD_APP)
            except psycopg.OperationalError:
                break
            self._held.append(conn)
        return len(self._held)

    def release(self) -> None:
        held, self._held = self._held, []
        for conn in held:
            threading.Thread(target=conn.close, daemon=True).start()

    def stop(self) -> None:
        self.release()
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._ctl("-m", "immediate", "stop", timeout_s=30)
        shutil.rmtree(self.workdir, ignore_errors=True)
