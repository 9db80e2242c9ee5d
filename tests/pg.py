"""Find a PostgreSQL server for the tests, or start a throwaway cluster.

Order: $TIDINGS_TEST_PG_URL; 127.0.0.1:5432 as `postgres`, then as `root`; a private cluster
from `initdb`/`pg_ctl` in a temp dir. When none works, PostgreSQL tests are skipped with a
loud message, except under CI=true where they fail.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class Server:
    user: str
    host: str
    port: int

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname="postgres", autocommit=True
        )

    def create_database(self, prefix: str = "tidings_test") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _reachable(server: Server) -> bool:
    try:
        with server.admin() as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _from_env() -> Server | None:
    url = os.environ.get("TIDINGS_TEST_PG_URL")
    if not url:
        return None
    info = psycopg.conninfo.conninfo_to_dict(url)
    return Server(
        user=str(info.get("user", "postgres")),
        host=str(info.get("host", "127.0.0.1")),
        port=int(info.get("port", 5432)),
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _throwaway_cluster() -> Server | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or [shutil.which("initdb") or ""]
    initdb = found[-1]
    if not initdb or not os.path.exists(initdb):
        return None
    bindir = os.path.dirname(initdb)
    workdir = tempfile.mkdtemp(prefix="tidings-pg-")
    datadir = os.path.join(workdir, "data")
    port = _free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(workdir, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    try:
        subprocess.run(
            [*prefix, initdb, "-D", datadir, "-U", "postgres", "--auth=trust"],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                *prefix,
                os.path.join(bindir, "pg_ctl"),
                "-D",
                datadir,
                "-w",
                "-l",
                os.path.join(workdir, "log"),
                "-o",
                f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None

    def stop() -> None:
        subprocess.run(
            [*prefix, os.path.join(bindir, "pg_ctl"), "-D", datadir, "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(workdir, ignore_errors=True)

    atexit.register(stop)
    server = Server("postgres", "127.0.0.1", port)
    for _ in range(50):
        if _reachable(server):
            return server
        time.sleep(0.1)
    return None


def find_server() -> tuple[Server | None, str]:
    """The server to use and a sentence saying where it came from (or why there is none)."""
    env = _from_env()
    if env is not None:
        if _reachable(env):
            return env, f"PostgreSQL from TIDINGS_TEST_PG_URL ({env.host}:{env.port})"
        return None, "TIDINGS_TEST_PG_URL is set but that server does not answer"
    for user in ("postgres", "root"):
        candidate = Server(user, "127.0.0.1", 5432)
        if _reachable(candidate):
            return candidate, f"PostgreSQL at 127.0.0.1:5432 as {user}"
    cluster = _throwaway_cluster()
    if cluster is not None:
        return cluster, f"throwaway PostgreSQL cluster on port {cluster.port}"
    return None, (
        "no PostgreSQL: nothing answers at 127.0.0.1:5432 (users postgres, root), "
        "TIDINGS_TEST_PG_URL is unset, and no throwaway cluster could be started"
    )
