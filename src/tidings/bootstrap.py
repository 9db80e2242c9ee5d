"""The composition root: settings in, a wired runtime out (hub, registry, service, metrics),
plus the database upgrade and the remote worker the CLI starts.

Imports tidings.config, the service level (hub, service, dispatch, remote) and the channel
registry; the entry points above it import this, never the reverse.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from tidings import tracing
from tidings.access import SessionPolicy
from tidings.channels.netguard import parse_networks
from tidings.channels.registry import Registry
from tidings.config import Settings
from tidings.core.breaker import Policy
from tidings.core.errors import SchemaError, StoreError
from tidings.dispatch import Dispatcher, DispatcherConfig
from tidings.hub import Hub
from tidings.metrics import Metrics
from tidings.remote import RemoteWorker
from tidings.service import Service

log = logging.getLogger("tidings")
#: The pauses between two tries at an unreachable database at start: first, longest. A
#: try is one connection attempt, so the longest pause is short: a worker waiting 10 s
#: after its database came back was a worker missing from the cluster for those 10 s.
FIRST_PAUSE_S = 0.5
LONGEST_PAUSE_S = 2.0
#: While the database stays away for the same reason, this often it is said again.
SAY_AGAIN_EVERY_S = 30.0
#: SQLSTATEs a database gives while it cannot take us yet: class 08 (connection exception),
#: too_many_connections, admin_shutdown, crash_shutdown, cannot_connect_now.
TRANSIENT_SQLSTATES = ("08", "53300", "57P01", "57P02", "57P03")


@dataclass
class Runtime:
    settings: Settings
    hub: Hub
    service: Service

    @property
    def registry(self) -> Registry:
        return self.hub.registry

    @property
    def metrics(self) -> Metrics:
        return self.service.metrics

    def dispatcher(self) -> Dispatcher:
        """The dispatcher of `serve` or `worker`; spans go over OTLP when OTEL_* asks."""
        tracing.configure_from_environment()
        return Dispatcher(
            self.hub.store,
            self.registry,
            dispatcher_config(self.settings),
            metrics=self.metrics,
            notifier=self.hub.notifier,
        )


def dispatcher_config(settings: Settings) -> DispatcherConfig:
    return DispatcherConfig(
        worker_id=settings.worker_id,
        lease_s=settings.lease_s,
        poll_interval_s=settings.poll_interval_s,
        concurrency=settings.concurrency,
        claim_size=settings.claim_size,
        grace_s=settings.grace_s,
        allowed_networks=parse_networks(settings.allowed_private_networks),
        breaker=Policy(
            failures=settings.breaker_failures,
            disable_after_s=settings.disable_after_s,
            first_backoff_s=settings.breaker_backoff_s,
            max_backoff_s=max(settings.breaker_backoff_s, 900.0),
        ),
        retention_days=settings.retention_days,
        retention_archive_dir=settings.retention_archive_dir,
        handoffs=settings.handoffs,
    )


def default_registry() -> Registry:
    """The built-in channel kinds and the installed plugins."""
    return Registry.default()


@asynccontextmanager
async def runtime(
    settings: Settings, *, migrate: bool = False, wait: bool = False
) -> AsyncIterator[Runtime]:
    """A runtime over the database `settings` name. Only `migrate` (serve, worker, db upgrade)
    changes its schema; otherwise a database not at this tidings' schema is refused, untouched.
    With `wait` (serve, worker), a database that cannot be reached yet is tried again for up
    to `settings.db_wait_s`. A database that cannot be used is named in the error (password
    masked) with the cause."""
    hub = Hub(settings.db, registry=default_registry(), lease_s=settings.lease_s)
    try:
        await _open(hub, migrate, settings.db_wait_s if wait else 0.0)
        service = Service(
            hub,
            allowed_networks=parse_networks(settings.allowed_private_networks),
            metrics=Metrics(hub.store),
            sessions=SessionPolicy(settings.session_idle_s, settings.session_lifetime_s),
        )
        yield Runtime(settings, hub, service)
    except StoreError as error:
        if isinstance(error, SchemaError) or error.cause is None:
            raise
        raise StoreError(f"database {hub.store.shown_url}: {error.cause}") from error
    finally:
        await hub.close()


async def _open(hub: Hub, migrate: bool, wait_s: float) -> None:
    """Migrate or check the schema, trying again while the database cannot be reached (a
    supervisor starting a service before its database, a restart, a connection limit)."""
    deadline = time.monotonic() + wait_s
    pause = FIRST_PAUSE_S
    said, said_at = "", float("-inf")
    while True:
        try:
            if migrate:
                await hub.migrate()
            else:
                await hub.store.check_schema()
            return
        except StoreError as error:
            now = time.monotonic()
            left = deadline - now
            if left <= 0 or not unreachable(error):
                raise
            cause = str(error.cause or error)
            if cause != said or now - said_at >= SAY_AGAIN_EVERY_S:
                log.warning(
                    "database %s cannot be reached: %s; trying again every %.1f s or less"
                    " (for %.0f s more)",
                    hub.store.shown_url,
                    cause,
                    min(LONGEST_PAUSE_S, left),
                    left,
                )
                said, said_at = cause, now
            await asyncio.sleep(min(pause, left))
            pause = min(2 * pause, LONGEST_PAUSE_S)


def unreachable(error: BaseException) -> bool:
    """Whether `error` says the database cannot be reached for now (refused, reset, timed
    out, starting up or shutting down, out of connection slots), as opposed to refusing us
    (role, password, database name, permissions, schema), which waiting does not mend."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SchemaError):
            return False
        if isinstance(current, OSError | TimeoutError):
            return True
        state = getattr(current, "sqlstate", None)
        if isinstance(state, str):
            return state.startswith(TRANSIENT_SQLSTATES)
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return False


async def upgrade(settings: Settings) -> str:
    """Apply the database migrations; the database as messages name it."""
    async with runtime(settings, migrate=True) as rt:
        return rt.hub.store.shown_url


def remote_worker(
    settings: Settings,
    server: str,
    token: str,
    kinds: Sequence[str] | None,
    tenants: Sequence[str] | None,
) -> RemoteWorker:
    """A worker that leases from `server` over HTTP and needs no database (W4)."""
    return RemoteWorker(
        server,
        token,
        default_registry(),
        worker_id=settings.worker_id,
        kinds=kinds,
        tenants=tenants,
        poll_interval_s=settings.poll_interval_s,
        concurrency=settings.concurrency,
        allowed_networks=parse_networks(settings.allowed_private_networks),
    )
