"""Prometheus metrics: what the dispatcher counts as it works, and what the database holds.

Counters and the latency histogram are fed by the dispatcher in this process; the gauges of
the deliveries waiting and in flight and of the oldest pending age are read from the database
at each scrape, so they are true for the whole cluster. A scrape reads the queue, never the
history: how many deliveries a channel ever sent or failed grows for as long as tidings runs,
and counting it at every scrape cost seconds at ten million rows (the outcomes are counted
as they happen, by `tidings_attempts_total`). Prometheus' conventions hold: counters end in
`_total`, no `_created` series, every channel has an oldest-pending sample (0 when nothing
is pending, so an alert on it never sees a gap; the queue's counts are given where not 0, as
with ten thousand mostly idle channels their zeros were half the scrape), and
`tidings_build_info` names the version.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from tidings.core.breaker import HEALTHY, BreakerState
from tidings.core.version import VERSION
from tidings.store import Store

_BREAKER_LEVEL = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class Metrics:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.registry = CollectorRegistry(auto_describe=True)
        self.attempts = Counter(
            "tidings_attempts_total",
            "Send attempts by outcome",
            ["kind", "status"],
            registry=self.registry,
        )
        self.send_seconds = Histogram(
            "tidings_send_seconds",
            "Time one send took, by channel kind",
            ["kind"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        # Each label set's child, kept: `labels()` takes a lock and builds a key every time.
        self._attempts: dict[tuple[str, str], Counter] = {}
        self._send_seconds: dict[str, Histogram] = {}
        self._claims: dict[str, Counter] = {}
        self.claims = Counter(
            "tidings_claimed_deliveries_total",
            "Deliveries leased by claims",
            ["mode"],
            registry=self.registry,
        )
        self.handed = Counter(
            "tidings_handed_deliveries_total",
            "Deliveries a publish leased to this worker without a claim (hand-offs; counted"
            " in tidings_claimed_deliveries_total too)",
            registry=self.registry,
        )
        self.fenced_writes = Counter(
            "tidings_fenced_writes_total",
            "Stale writes refused by lease fencing (this process)",
            registry=self.registry,
        )
        build = Gauge(
            "tidings_build_info",
            "The running tidings: its version and Python's (always 1)",
            ["version", "python"],
            registry=self.registry,
        )
        build.labels(version=VERSION, python=platform.python_version()).set(1)

        self.purged_rows = Counter(
            "tidings_purged_rows",
            "Rows deleted by retention (R1): deliveries with their attempts, events, other",
            ["what"],
            registry=self.registry,
        )

    def sent(self, kind: str, status: str, seconds: float, messages: int = 1) -> None:
        # Children by label values, looked up once: `.labels()` costs more than the count.
        attempts = self._attempts.get((kind, status))
        if attempts is None:
            attempts = self._attempts[kind, status] = self.attempts.labels(kind, status)
        attempts.inc(messages)
        timing = self._send_seconds.get(kind)
        if timing is None:
            timing = self._send_seconds[kind] = self.send_seconds.labels(kind)
        timing.observe(seconds)

    def purged(self, deliveries: int, events: int, other: int) -> None:
        """Rows retention deleted (R1), by table group."""
        for what, rows in (("deliveries", deliveries), ("events", events), ("other", other)):
            if rows:
                self.purged_rows.labels(what=what).inc(rows)

    def fenced(self, rows: int) -> None:
        """Rows a write left alone because their lease had passed to another worker (C3)."""
        self.fenced_writes.inc(rows)

    def claimed(self, mode: str, count: int) -> None:
        claims = self._claims.get(mode)
        if claims is None:
            claims = self._claims[mode] = self.claims.labels(mode=mode)
        claims.inc(count)

    async def render(self) -> bytes:
        """Read the database gauges and render the text exposition format."""
        from_database = await _DatabaseGauges.read(self._store)
        return generate_latest(_WithoutCreated(self.registry, from_database))


@dataclass(frozen=True)
class _DatabaseGauges:
    """The gauges read from the database at a scrape, as metric families built straight
    from the rows: with ten thousand channels a gauge child per label set, made and dropped
    at every scrape, cost most of a second."""

    families: list[Metric]

    @classmethod
    async def read(cls, store: Store) -> _DatabaseGauges:
        deliveries = GaugeMetricFamily(
            "tidings_deliveries",
            "Deliveries waiting (pending) and being sent (sending), by channel",
            labels=["channel", "state"],
        )
        oldest_pending = GaugeMetricFamily(
            "tidings_oldest_pending_age_seconds",
            "Age of the oldest pending delivery, by channel (0: none pending)",
            labels=["channel"],
        )
        breaker = GaugeMetricFamily(
            "tidings_channel_breaker_open",
            "A channel's circuit breaker: 0 closed, 1 half-open (probing), 2 open (H1)",
            labels=["channel"],
        )
        failures = GaugeMetricFamily(
            "tidings_channel_consecutive_failures",
            "Retryable failures since a channel's last success",
            labels=["channel"],
        )
        now = datetime.now(UTC)
        oldest = dict(await store.oldest_pending())
        health = await store.breakers()
        names: dict[int, str] = {}
        for channel_id, name, _kind in await store.channel_refs():
            names[channel_id] = name
            since = oldest.get(name)
            age = 0.0 if since is None else max(0.0, (now - since).total_seconds())
            oldest_pending.add_metric([name], age)
            found = health.get(channel_id, HEALTHY)
            breaker.add_metric([name], _BREAKER_LEVEL[found.state])
            failures.add_metric([name], found.consecutive_failures)
        for (channel_id, state), count in sorted((await store.live_delivery_counts()).items()):
            if channel_id in names:  # not a channel deleted since the names were read
                deliveries.add_metric([names[channel_id], state], count)
        return cls([deliveries, oldest_pending, breaker, failures])


class _WithoutCreated:
    """The registry's metrics without the `_created` samples prometheus_client adds to
    counters and histograms (a timestamp series per label set that nobody queries), and
    then the database's."""

    def __init__(self, registry: CollectorRegistry, database: _DatabaseGauges) -> None:
        self._registry = registry
        self._database = database

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family
        yield from self._database.families
