"""Prometheus metrics: what the dispatcher counts as it works, and what the database holds.

Counters and the latency histogram are fed by the dispatcher in this process; the gauges of
deliveries by state and of the oldest pending age are read from the database at each scrape,
so they are true for the whole cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tidings.core.breaker import HEALTHY, BreakerState
from tidings.store import Store

_BREAKER_LEVEL = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class Metrics:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.registry = CollectorRegistry(auto_describe=True)
        self.attempts = Counter(
            "tidings_attempts",
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
        self._attempts: dict[tuple[str, str], Counter] = {}
        self._send_seconds: dict[str, Histogram] = {}
        self.claims = Counter(
            "tidings_claimed_deliveries",
            "Deliveries leased by claims",
            ["mode"],
            registry=self.registry,
        )
        self.fenced_writes = Counter(
            "tidings_fenced_writes",
            "Stale writes refused by lease fencing (this process)",
            registry=self.registry,
        )
        self.deliveries = Gauge(
            "tidings_deliveries",
            "Deliveries by channel and state",
            ["channel", "state"],
            registry=self.registry,
        )
        self.oldest_pending = Gauge(
            "tidings_oldest_pending_age_seconds",
            "Age of the oldest pending delivery",
            ["channel"],
            registry=self.registry,
        )

        self.purged_rows = Counter(
            "tidings_purged_rows",
            "Rows deleted by retention (R1): deliveries with their attempts, events, other",
            ["what"],
            registry=self.registry,
        )
        self.breaker = Gauge(
            "tidings_channel_breaker_open",
            "A channel's circuit breaker: 0 closed, 1 half-open (probing), 2 open (H1)",
            ["channel"],
            registry=self.registry,
        )
        self.consecutive_failures = Gauge(
            "tidings_channel_consecutive_failures",
            "Retryable failures since a channel's last success",
            ["channel"],
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
        self.claims.labels(mode=mode).inc(count)

    async def render(self) -> bytes:
        """Refresh the database gauges and render the text exposition format."""
        self.deliveries.clear()
        for channel, state, count in await self._store.delivery_counts():
            self.deliveries.labels(channel=channel, state=state).set(count)
        self.oldest_pending.clear()
        now = datetime.now(UTC)
        for channel, oldest in await self._store.oldest_pending():
            self.oldest_pending.labels(channel=channel).set((now - oldest).total_seconds())
        await self._breakers()
        return generate_latest(self.registry)

    async def _breakers(self) -> None:
        health = await self._store.breakers()
        self.breaker.clear()
        self.consecutive_failures.clear()
        for channel in await self._store.list_channels():
            found = health.get(channel.id, HEALTHY)
            self.breaker.labels(channel=channel.name).set(_BREAKER_LEVEL[found.state])
            self.consecutive_failures.labels(channel=channel.name).set(found.consecutive_failures)
