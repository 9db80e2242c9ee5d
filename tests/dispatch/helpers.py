"""Running a real dispatcher inside a test, against a real database and a real HTTP sink."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import psycopg

import tidings
from tidings.channels.base import Adapter
from tidings.channels.netguard import parse_networks
from tidings.channels.registry import Registry, builtin_adapters
from tidings.core.clock import SYSTEM_CLOCK, Clock
from tidings.core.states import FINAL
from tidings.dispatch import Dispatcher, DispatcherConfig
from tidings.metrics import Metrics
from tidings.store import Store
from tidings.store.notify import APPLICATION_NAME

LOOPBACK = parse_networks("127.0.0.0/8")


@contextlib.asynccontextmanager
async def running(
    hub: tidings.Hub,
    extra_adapters: Iterable[Adapter] = (),
    *,
    clock: Clock = SYSTEM_CLOCK,
    metrics: Metrics | None = None,
    store: Store | None = None,
    **config: Any,
) -> AsyncIterator[Dispatcher]:
    """A dispatcher running as a task for the duration of the block, stopped gracefully;
    on `store` when given (one that watches or holds the dispatcher's calls)."""
    config.setdefault("worker_id", "test-dispatcher")
    config.setdefault("poll_interval_s", 0.2)
    config.setdefault("lease_s", 60.0)
    config.setdefault("grace_s", 5.0)
    config.setdefault("allowed_networks", LOOPBACK)
    registry = Registry([*builtin_adapters(), *extra_adapters])
    dispatcher = Dispatcher(
        hub.store if store is None else store,
        registry,
        DispatcherConfig(**config),
        notifier=hub.notifier,
        clock=clock,
        metrics=metrics,
    )
    task = asyncio.create_task(dispatcher.run())
    try:
        yield dispatcher
    finally:
        dispatcher.stop()
        await asyncio.wait_for(task, timeout=30)


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout_s: float = 15.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout_s} s")


async def settled(hub: tidings.Hub, count: int, timeout_s: float = 15.0) -> list[tidings.Delivery]:
    """Wait until `count` deliveries have ended (sent, failed or skipped); return them all."""

    async def done() -> bool:
        page = await hub.deliveries(page_size=200)
        return sum(v.delivery.state in FINAL for v in page.items) >= count

    await eventually(done, timeout_s, f"{count} deliveries settled")
    page = await hub.deliveries(page_size=200)
    return sorted((v.delivery for v in page.items), key=lambda d: d.id)


async def webhook(hub: tidings.Hub, url: str, name: str = "hook", **fields: Any) -> tidings.Channel:
    config = {"url": url} | fields.pop("config", {})
    fields.setdefault("retry_backoff_s", 0.05)
    fields.setdefault("timeout_s", 5.0)
    return await hub.channels.create(name=name, kind="webhook", config=config, **fields)


def kill_wakeup_connections(pg_url: str) -> int:
    """End the LISTEN connections of the test's database (as a restart or a dropped network
    would); how many there were."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            [APPLICATION_NAME],
        ).fetchone()
    assert row is not None
    return int(row[0])
