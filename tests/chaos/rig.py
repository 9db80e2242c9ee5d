"""The rig of one chaos run: a receiver, a database (a throwaway PostgreSQL cluster behind a
TCP proxy, or one SQLite file), dispatcher processes (workers; on SQLite a `serve` and a
worker sharing the file), and a publisher. It starts them, restarts them after a fault, and
reads what the ledger needs at the end."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import tidings
from tests.chaos import disk, procs, tls
from tests.chaos.cluster import Cluster, binaries
from tests.chaos.proxy import Proxy
from tests.chaos.publisher import CHANNELS, Publisher, Secrets, create_channels, new_secrets
from tidings.store import migrate

LEASE_S = 5.0
WORKER_SETTINGS: dict[str, object] = {
    "lease_s": LEASE_S,
    "poll_interval_s": 0.5,
    "grace_s": 2,
    "breaker_backoff_s": 1,
    "claim_size": 100,
    "allowed_private_networks": "127.0.0.0/8",
}
PENDING_SQL = "SELECT count(*) FROM deliveries WHERE state IN ('pending', 'sending')"
#: What is still unsettled when a settle gives up: per channel and state, with the channel's
#: breaker and rate-limit state and when its next row is due (the database's clock).
UNSETTLED_SQL = """
SELECT c.name, d.state, count(*) AS n,
       round(extract(epoch FROM min(d.next_attempt_at) - now())) AS next_due_in_s,
       h.state AS breaker, h.backoff_s, round(extract(epoch FROM h.until - now())) AS until_s,
       round(extract(epoch FROM b.paused_until - now())) AS paused_for_s,
       round(b.tokens::numeric, 1) AS tokens, round(extract(epoch FROM now() - b.updated_at))
         AS bucket_age_s
FROM deliveries d JOIN channels c ON c.id = d.channel_id
LEFT JOIN channel_health h ON h.channel_id = c.id
LEFT JOIN rate_buckets b ON b.channel_id = c.id
WHERE d.state IN ('pending', 'sending')
GROUP BY c.name, d.state, h.state, h.backoff_s, h.until, b.paused_until, b.tokens, b.updated_at
ORDER BY c.name, d.state
"""
#: A supervisor's pause before starting a process again, first and longest (seconds).
RESTART_PAUSE_S = (0.5, 5.0)


@dataclass
class Rig:
    backend: str
    workdir: Path
    seed: int
    worker_count: int = 2
    #: How long a fault lasts before it is healed (seconds, drawn in this range).
    hold_s: tuple[float, float] = (1.0, 4.0)
    #: A running cluster to use (the rig makes a database in it and leaves it running);
    #: None: the rig starts a cluster of its own and stops it at the end.
    cluster: Cluster | None = None
    database: str = "chaos"
    proxy: Proxy | None = None
    #: SQLite: the small disk the file lives on (None where mounting is not allowed).
    disk: disk.Disk | None = None
    db_url: str = ""  # what the harness uses (direct)
    worker_db_url: str = ""  # what the dispatchers use (through the proxy on PostgreSQL)
    receiver: procs.Proc | None = None
    receiver_port: int = 0
    tls_port: int = 0  # the receiver's TLS port
    #: For every dispatcher: trust the CA of the receiver's TLS port.
    extra_env: dict[str, str] = field(default_factory=dict)
    record: Path = field(init=False)
    workers: list[procs.Proc] = field(default_factory=list)
    #: Workers a fault holds right now (by name), so another picks a different one.
    faulted: set[str] = field(default_factory=set)
    retired: list[procs.Proc] = field(default_factory=list)
    serve: procs.Proc | None = None
    serve_port: int = 0
    token: str = ""
    read_token: str = ""
    secrets: Secrets | None = None
    hub: tidings.Hub | None = None
    publisher: Publisher | None = None
    notes: list[str] = field(default_factory=list)  # problems a fault tool saw (violations)
    #: Processes that exited at start and were started again (as a supervisor would).
    start_failures: int = 0
    _restarts: int = 0
    _owns_cluster: bool = False

    def __post_init__(self) -> None:
        self.record = self.workdir / "received.jsonl"

    def hold(self, rng: random.Random) -> float:
        return rng.uniform(*self.hold_s)

    # -- start and stop ---------------------------------------------------------

    async def start(self) -> None:
        rng = random.Random(self.seed)
        self.secrets = new_secrets(rng)
        # The key the channels' secrets are sealed with (S4), for this process and its children;
        # without one the library would write a key file into the working directory.
        os.environ.setdefault("TIDINGS_SECRET_KEY", base64.b64encode(rng.randbytes(32)).decode())
        await asyncio.to_thread(self._start_database)
        self.receiver_port = procs.free_port()
        self.tls_port = procs.free_port()
        certificates = await asyncio.to_thread(tls.make, self.workdir / "tls")
        self.extra_env = {"SSL_CERT_FILE": str(certificates.ca)}
        paths = {plan.path: self.secrets.signing[plan.path] for plan in CHANNELS}
        self.receiver = procs.receiver(
            self.workdir,
            self.receiver_port,
            self.record,
            paths,
            tls=(self.tls_port, certificates.directory),
        )
        await asyncio.to_thread(self.receiver.start)
        self.hub = tidings.Hub(self.db_url, lease_s=LEASE_S)
        await create_channels(self.hub, self.receiver_port, self.tls_port, self.secrets)
        # Tokens first: a serve that finds none makes an admin token of its own at start.
        self.token = await asyncio.to_thread(self._token, "publish")
        self.read_token = await asyncio.to_thread(self._token, "read", "admin")
        # SQLite: a serve (API + dispatcher) and a worker share the file, and events are
        # published through the API; PostgreSQL: an API-only serve, events published through
        # the library.
        sqlite = self.backend == "sqlite"
        self.serve_port = procs.free_port()
        self.serve = procs.serve(
            self.workdir,
            self.db_url,
            self.serve_port,
            dispatch=sqlite,
            extra_env=self.extra_env,
            **WORKER_SETTINGS,
        )
        await asyncio.to_thread(self.serve.start)
        if sqlite:
            await self.hub.close()
            self.hub = None
            self.publisher = Publisher(api=(self.serve_port, self.token))
        else:
            self.publisher = Publisher(hub=self.hub)
        for i in range(self.worker_count):
            await self.start_worker(f"w{i + 1}")

    def _start_database(self) -> None:
        if self.backend == "sqlite":
            where = self.workdir
            if disk.available() is None:
                self.disk = disk.Disk(self.workdir / "disk")
                self.disk.mount()
                where = self.disk.mountpoint
            self.db_url = self.worker_db_url = f"sqlite:///{where / 'tidings.db'}"
            _migrate(self.db_url)
            return
        if self.cluster is None:
            bindir = binaries()
            if bindir is None:
                raise RuntimeError("initdb / pg_ctl not found (install PostgreSQL)")
            self.cluster = Cluster(bindir)
            self.cluster.start()
            self._owns_cluster = True
        self.db_url = self.cluster.create_database(self.database)
        _migrate(self.db_url)
        self.proxy = Proxy(self.cluster.port)
        self.proxy.start()
        self.worker_db_url = self.db_url.replace(
            f"127.0.0.1:{self.cluster.port}/", f"127.0.0.1:{self.proxy.port}/"
        )

    def _token(self, *scopes: str) -> str:
        argv = [sys.executable, "-m", "tidings", "token", "create", "--name", "chaos"]
        for scope in scopes:
            argv += ["--scope", scope]
        done = subprocess.run(
            [*argv, "--db", self.db_url], capture_output=True, text=True, check=True
        )
        return done.stdout.strip().splitlines()[-1]

    async def start_worker(self, name: str, skew_s: float = 0) -> procs.Proc:
        proc = procs.worker(
            self.workdir, self.worker_db_url, name, skew_s, self.extra_env, **WORKER_SETTINGS
        )
        self.workers.append(proc)
        # Held while it starts: a fault that took it now would leave this supervision
        # restarting a process nobody counts or stops.
        self.faulted.add(name)
        try:
            await self.supervise(proc)
        finally:
            self.faulted.discard(name)
        return proc

    async def supervise(self, proc: procs.Proc, give_up_s: float = 600.0) -> None:
        """Start `proc` as a supervisor (systemd's Restart=always) would: a process that
        exits at start (its database unreachable mid-fault, say) is started again, after a
        pause that grows to RESTART_PAUSE_S[1]."""
        deadline = time.monotonic() + give_up_s
        pause = RESTART_PAUSE_S[0]
        while proc not in self.retired:
            try:
                await asyncio.to_thread(proc.start)
                return
            except RuntimeError:
                self.start_failures += 1
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(2 * pause, RESTART_PAUSE_S[1])

    async def replace_worker(self, proc: procs.Proc) -> None:
        """A dead worker's place is taken by a fresh process (a new id, so attempt rows tell
        the two apart)."""
        self.workers.remove(proc)
        self.retired.append(proc)
        self._restarts += 1
        base = proc.name.split(".")[0]
        await self.start_worker(f"{base}.{self._restarts}")

    async def stop_processes(self) -> None:
        """Stop the dispatchers, the API and the receiver; the database stays up."""
        every = [*self.workers, *self.retired, *([self.serve] if self.serve else [])]
        for proc in every:  # a retired one is dead already, unless something went wrong
            await asyncio.to_thread(proc.stop)
        if self.receiver is not None:
            await asyncio.to_thread(self.receiver.stop)
        if self.hub is not None:
            await self.hub.close()

    async def stop(self, keep_files: bool = False) -> None:
        await self.stop_processes()
        if self.disk is not None:
            if keep_files:  # the mount goes: the file is copied out of it first
                for path in self.disk.mountpoint.glob("tidings.db*"):
                    shutil.copy2(path, self.workdir / path.name)
            self.disk.unmount()
        if self.proxy is not None:
            self.proxy.stop()
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.release)
            if self._owns_cluster:
                await asyncio.to_thread(self.cluster.stop)

    # -- during and after the run ----------------------------------------------

    async def heal(self) -> None:
        """Undo every fault that may still be in place."""
        if self.proxy is not None:
            await asyncio.to_thread(self.proxy.heal)
        if self.disk is not None:
            self.disk.free()
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.release)
        assert self.receiver is not None
        if not self.receiver.alive:
            await self.supervise(self.receiver)
        await asyncio.to_thread(procs.control, self.receiver_port, "ok")
        for proc in list(self.workers):
            proc.signal(signal.SIGCONT)  # a stopped worker resumes
            if not proc.alive:
                await self.replace_worker(proc)
        if self.serve is not None and not self.serve.alive:
            await self.supervise(self.serve)

    async def unsettled(self) -> int:
        return await asyncio.to_thread(self._scalar, PENDING_SQL)

    def _scalar(self, sql: str) -> int:
        if self.backend == "sqlite":
            path = self.db_url.removeprefix("sqlite:///")
            with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
                return int(conn.execute(sql).fetchone()[0])
        import psycopg

        with psycopg.connect(self.db_url, connect_timeout=5) as conn:
            row = conn.execute(sql).fetchone()
            return int(row[0]) if row else 0

    async def settle(self, stall_s: float, longest_s: float = 1800.0) -> float:
        """Wait until no delivery is pending or sending, for as long as their number keeps
        falling (a rate-limited backlog drains at its rate) but not past `longest_s`, nor
        `stall_s` without progress; returns how long it took. Giving up leaves a note of what
        was still unsettled, and why."""
        started = time.monotonic()
        least: int | None = None
        progressed = started
        while time.monotonic() - started < longest_s:
            try:
                left = await self.unsettled()
            except Exception as error:  # the database may be coming back
                self.notes.append(f"settle: {error}")
                left = None
            if left == 0:
                return time.monotonic() - started
            if left is not None and (least is None or left < least):
                least, progressed = left, time.monotonic()
            if time.monotonic() - progressed > stall_s:
                break
            await asyncio.sleep(0.5)
        with contextlib.suppress(Exception):
            self.notes.append(f"settle gave up: {least} unsettled: {await self.why_unsettled()}")
        return time.monotonic() - started

    async def why_unsettled(self) -> list[dict[str, object]]:
        if self.backend == "sqlite":
            return []  # the ledger's I1 lists them; SQLite has no now() for the rest
        return await asyncio.to_thread(self._rows, UNSETTLED_SQL)

    def _rows(self, sql: str) -> list[dict[str, object]]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.db_url, connect_timeout=5, row_factory=dict_row) as conn:
            return [dict(r) for r in conn.execute(sql).fetchall()]

    def integrity(self) -> str:
        path = self.db_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    def logs(self) -> list[str]:
        every = [*self.workers, *self.retired, *([self.serve] if self.serve else [])]
        return [proc.output() for proc in every]

    async def api_answers(self) -> list[str]:
        """What the API shows of the deliveries and channels (I6 reads them for secrets)."""
        if self.serve is None or not self.serve.alive:
            return []
        paths = [
            "/v1/channels",
            "/v1/deliveries?page_size=200&state=failed",
            "/v1/deliveries?page_size=200",
        ]
        answers = [await self._api_get(path) for path in paths]
        doc = json.loads(answers[-1] or "{}")
        for item in doc.get("items", [])[:20]:
            answers.append(await self._api_get(f"/v1/deliveries/{item['id']}"))
        return [a for a in answers if a is not None]

    async def _api_get(self, path: str, tries: int = 3) -> str | None:
        """The answer's body; a cut answer or a refused connection is asked again, and after
        `tries` it is noted (the run's report says which answer I6 could not read)."""
        for attempt in range(1, tries + 1):
            try:
                return await asyncio.to_thread(_get, self.serve_port, path, self.read_token)
            except (OSError, http.client.HTTPException) as error:
                if attempt == tries:
                    self.notes.append(f"GET {path} unread after {tries} tries: {error!r}")
                    return None
                await asyncio.sleep(attempt)
        return None


def _get(port: int, path: str, token: str) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(answer.read().decode())


def _migrate(url: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            migrate.upgrade(conn)
    finally:
        engine.dispose()
