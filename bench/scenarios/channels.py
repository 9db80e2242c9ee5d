"""Many channels, on PostgreSQL: what one look for due channels, a `/metrics` scrape, the
dashboard, the list of breakers and a tenant's single publish cost with 100 and with 10,000
channels (few of them due, each of its own tenant), and a drain of 10 rows on each of
10,000 webhook channels (a multi-tenant shape) paired with `raw` like the e2e scenarios."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bench import bulk, workload
from bench.database import drain, states_pg
from bench.keys import shared_key_file
from bench.processes import workers
from bench.result import Result
from bench.rig import Rig
from bench.scenarios.e2e import paired

TIMEOUT_S = 600
#: Looks timed per size; the figure is their median.
LOOKS = 200
#: Channels with a due row during the looks: "few due".
DUE_DURING_LOOKS = 10
#: Prometheus scrapes (every channel has its series), dashboards and breaker lists timed per
#: size; each figure is the median.
SCRAPES = 5
#: Single publishes of one tenant's event timed per size (after the first, which reads the
#: channels); the figure is their median.
PUBLISHES = 50


@dataclass(frozen=True)
class Sizes:
    look_channels: tuple[int, ...]
    channels: int
    rows_per_channel: int

    @classmethod
    def of(cls, rig: Rig) -> Sizes:
        if rig.counts.e2e < 20_000:  # --quick
            return cls(look_channels=(10, 100), channels=100, rows_per_channel=10)
        return cls(look_channels=(100, 10_000), channels=10_000, rows_per_channel=10)


def _fill(rig: Rig, name: str, url: str, channels: int, rows_per_channel: int) -> list[int]:
    bulk.setup(url, [workload.webhook("template", rig.sink.url("/hook"))])
    with rig.pg.connect(name) as conn:
        ids = bulk.copy_channel(conn, "template", channels - 1, "tenant-")
        template = conn.execute("SELECT id FROM channels WHERE name = 'template'").fetchone()
        assert template is not None
        ids = [int(template[0]), *ids]
        if rows_per_channel:
            bulk.pending_rows(conn, ids, rows_per_channel)
    return ids


@dataclass(frozen=True)
class Looked:
    """Medians, in seconds: a look for due channels and one for the next due time (asked
    the way a dispatcher asks, with its previous answer), and a Prometheus scrape."""

    look: float
    next_due: float
    due: int
    scrape: float
    scrape_bytes: int
    #: The admin UI's dashboard and the API's list of every channel's breaker.
    dashboard: float
    breakers: float
    #: One event of one tenant published through the library (one delivery).
    publish: float
    #: The same, the first after another process changed a channel (read them again).
    publish_after_change: float


async def _looks(url: str, tenant: str) -> Looked:
    from sqlalchemy import text

    import tidings  # on use: see bench/scenarios/raw.py
    from tidings.metrics import Metrics
    from tidings.service import Service

    async with tidings.Hub(url) as hub:
        known: dict[int, Any] = {}
        due: list[Any] = []
        looks: list[float] = []
        nexts: list[float] = []
        for _ in range(LOOKS):
            t = time.perf_counter()
            due = await hub.store.due_channels(known)
            looks.append(time.perf_counter() - t)
            known = {c.id: c for c in due}
            t = time.perf_counter()
            await hub.store.next_due_at()
            nexts.append(time.perf_counter() - t)
        metrics = Metrics(hub.store)
        scrapes: list[float] = []
        size = 0
        for _ in range(SCRAPES):
            t = time.perf_counter()
            size = len(await metrics.render())
            scrapes.append(time.perf_counter() - t)
        service = Service(hub)
        event = workload.event(0) | {"tenant": tenant}
        await hub.publish(**event)  # reads the channels: publishes after it plan from them
        publishes = []
        for _ in range(PUBLISHES):
            t = time.perf_counter()
            await hub.publish(**event)
            publishes.append(time.perf_counter() - t)
        after_change = []
        for _ in range(PUBLISHES):
            async with hub.store.engine.begin() as conn:  # as another process would
                await conn.execute(
                    text(
                        "UPDATE channels SET enabled = enabled"
                        " WHERE id = (SELECT min(id) FROM channels)"
                    )
                )
            t = time.perf_counter()
            await hub.publish(**event)
            after_change.append(time.perf_counter() - t)
        return Looked(
            statistics.median(looks),
            statistics.median(nexts),
            len(due),
            statistics.median(scrapes),
            size,
            await _median_s(service.dashboard),
            await _median_s(service.breakers),
            statistics.median(publishes),
            statistics.median(after_change),
        )


async def _median_s(read: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(SCRAPES):
        t = time.perf_counter()
        await read()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def look_cost(rig: Rig, channels: int) -> Looked:
    """One look's cost on `channels` channels, each with a sent row of history and
    DUE_DURING_LOOKS of them with a due row, each its own tenant (named as the channel)."""
    with rig.pg.database() as (name, url):
        ids = _fill(rig, name, url, channels, 1)
        with rig.pg.connect(name) as conn:
            conn.execute("UPDATE deliveries SET state = 'sent', sent_at = now()")
            conn.execute("VACUUM ANALYZE deliveries")
            bulk.pending_rows(conn, ids[:: max(1, len(ids) // DUE_DURING_LOOKS)], 1)
            conn.execute("UPDATE channels SET tenant = name")
        return asyncio.run(_looks(url, "template"))


def _looks_results(rig: Rig, sizes: Sizes) -> list[Result]:
    measured = {n: look_cost(rig, n) for n in sizes.look_channels}
    small, large = sizes.look_channels
    notes: dict[str, Any] = {
        f"{n}_channels": {
            "due_channels_ms": round(m.look * 1000, 3),
            "next_due_at_ms": round(m.next_due * 1000, 3),
            "due": m.due,
            "scrape_ms": round(m.scrape * 1000, 1),
            "scrape_kib": round(m.scrape_bytes / 1024),
            "dashboard_ms": round(m.dashboard * 1000, 1),
            "breakers_ms": round(m.breakers * 1000, 1),
            "tenant_publish_ms": round(m.publish * 1000, 2),
            "publish_after_change_ms": round(m.publish_after_change * 1000, 2),
        }
        for n, m in measured.items()
    }
    notes["large_over_small"] = round(measured[large].look / measured[small].look, 2)
    notes["looks"] = LOOKS
    notes["scrapes"] = SCRAPES
    notes["publishes"] = PUBLISHES
    return [
        *(
            Result(f"channels/look-{n}", m.look * 1000, "ms", "postgresql", notes=notes)
            for n, m in measured.items()
        ),
        *(
            Result(
                f"channels/{what}-{n}", getattr(m, field) * 1000, "ms", "postgresql", notes=notes
            )
            for what, field in (
                ("metrics-scrape", "scrape"),
                ("dashboard", "dashboard"),
                ("breakers", "breakers"),
                ("publish", "publish"),
                ("publish-after-change", "publish_after_change"),
            )
            for n, m in measured.items()
        ),
    ]


def drain_once(rig: Rig, sizes: Sizes) -> tuple[float, dict[str, Any]]:
    """deliveries/s of one worker draining `rows_per_channel` rows on each channel."""
    total = sizes.channels * sizes.rows_per_channel
    with rig.pg.database() as (name, url):
        t = time.monotonic()
        _fill(rig, name, url, sizes.channels, sizes.rows_per_channel)
        fill_s = time.monotonic() - t
        states = states_pg(rig.pg, name)
        before = rig.sink.stats()["count"]
        with workers(rig.tmp, url, 1, poll_interval_s=1, lease_s=120) as started:
            t0 = started[0].wait_started()
            rig.sink.wait_for(before + total, TIMEOUT_S)
            done_at, final = drain(states, total, TIMEOUT_S, interval_s=0.01)
            rss = started[0].peak_rss_kib()
        if final.get("sent", 0) != total:
            raise RuntimeError(f"not every delivery was sent: {final}")
        elapsed = done_at - t0
        return total / elapsed, {
            "channels": sizes.channels,
            "rows_per_channel": sizes.rows_per_channel,
            "deliveries": total,
            "drain_s": round(elapsed, 3),
            "fill_s": round(fill_s, 3),
            "worker_peak_rss_mib": round(rss / 1024, 1) if rss else None,
        }


def _drain_result(rig: Rig, sizes: Sizes) -> Result:
    label = f"channels/{sizes.channels}"
    rate, ratio, notes = paired(rig, label, lambda: drain_once(rig, sizes))
    name = f"channels/{sizes.channels}x{sizes.rows_per_channel}"
    return Result(name, rate, "deliveries/s", "postgresql", ratio_to_raw=ratio, notes=notes)


def run(rig: Rig) -> list[Result]:
    sizes = Sizes.of(rig)
    out: list[Result] = []
    for part in (_looks_results, lambda r, s: [_drain_result(r, s)]):
        try:
            with shared_key_file(rig.tmp):
                out.extend(part(rig, sizes))
        except Exception as error:
            out.append(Result("channels", None, "", "postgresql", error=repr(error)))
            print(f"  channels: {error!r}", flush=True)
    return out
