"""What keeps a deployment healthy for years: channel health (H1), bulk replay (M3) and
retention (R1), as Store operations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from tidings.core.breaker import HEALTHY, Policy
from tidings.core.model import ReplayQuery, ReplayResult
from tidings.store import health, replay, retention
from tidings.store.clock import TxClock
from tidings.store.notify import OnWork
from tidings.store.runner import Runner


class Operations(Runner):
    #: The in-process wake-up the Store was given (W2).
    _on_work: OnWork | None = None

    # -- channel health (H1) -------------------------------------------------------------

    async def record_health(
        self,
        channel_id: int,
        delivered: bool,
        failures: int,
        error: str,
        policy: Policy,
        *,
        now: datetime | None = None,
    ) -> health.Change:
        """A claim's outcomes for the channel's breaker. A delivery to a healthy channel —
        nearly every claim — costs one read."""
        if delivered:
            current = await self._run(
                lambda conn, _clock: health.load(conn, channel_id), read_only=True
            )
            if current == HEALTHY:
                return health.Change()
        return await self._run(
            health.record, channel_id, delivered, failures, error, policy, now=now
        )

    # -- bulk replay (M3) -----------------------------------------------------------------

    async def replay(
        self,
        query: ReplayQuery,
        operator: str,
        request_id: str,
        *,
        dry_run: bool = False,
        now: datetime | None = None,
    ) -> ReplayResult:
        """M3: requeue (or with `dry_run` only count) a page of the ended rows `query`
        matches, once per `request_id`."""
        if dry_run:
            return await self._run(replay.count, query, now=now, read_only=True)
        result = await self._run(replay.resend, query, operator, request_id, now=now)
        if result.requeued and self._on_work is not None:
            self._on_work(None)  # many channels, maybe: look at every one
        return result

    # -- retention (R1) -------------------------------------------------------------------

    async def purge(
        self,
        retention_days: float,
        archive: retention.Archive | None = None,
        *,
        events_after: int | None = 0,
        limit: int = retention.BATCH,
        now: datetime | None = None,
    ) -> retention.Purged:
        """One batch of what has outlived its retention (archived first by `archive`); the
        sweep for events without a delivery goes on after `events_after` (None: no sweep)."""
        return await self._run(
            retention.purge_batch, retention_days, archive, limit, events_after, now=now
        )

    async def purge_due(
        self, retention_days: float, *, now: datetime | None = None
    ) -> dict[str, int]:
        """What a purge would delete now, by channel (a dry run)."""
        return await self._run(retention.due, retention_days, now=now, read_only=True)

    async def export_page(
        self, name: str, before: datetime, after_id: int, limit: int = 5000
    ) -> list[dict[str, Any]]:
        """A page of events, deliveries or attempts created before `before` (an archive)."""

        def op(conn: Connection, _clock: TxClock) -> list[dict[str, Any]]:
            return retention.export_page(conn, name, before, after_id, limit)

        return await self._run(op, read_only=True)
