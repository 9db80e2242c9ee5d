"""Retention inside the dispatchers (R1): purge in small batches what has outlived its
retention, one dispatcher at a time cluster-wide (the store takes the turn), archived first
when an archive directory is set.

A purge yields to deliveries: while the dispatcher has jobs running it rests after each batch
long enough that purging takes at most `SHARE_WHILE_DELIVERING` of the time (as autovacuum's
cost delay does), and only a short pause when there is nothing to deliver. A backlog of a
million expired rows then drains in the quiet hours instead of halving the send rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from tidings.core.errors import StoreError
from tidings.metrics import Metrics
from tidings.store import Store
from tidings.store.retention import Purged

log = logging.getLogger("tidings.dispatch.retention")
#: How often a dispatcher looks for what to purge when the last look found nothing.
EVERY_S = 60.0
#: The pause between two batches of one purge with nothing to deliver.
BETWEEN_BATCHES_S = 0.05
#: While deliveries run, the part of the time a purge may take.
SHARE_WHILE_DELIVERING = 0.05
#: What a batch is taken to cost before one has been timed.
GUESSED_BATCH_S = 0.1
#: How often the sweep for events that never had a delivery starts over (events whose
#: deliveries a purge deletes are checked at once).
SWEEP_EVERY_S = 3600.0


class ArchiveFile:
    """One gzipped JSON Lines file per purge batch: `{"type": …, "row": {…}}` per line."""

    def __init__(self, directory: str) -> None:
        self._directory = Path(directory)
        self._file: IO[str] | None = None

    def __enter__(self) -> ArchiveFile:
        self._directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = self._directory / f"tidings-archive-{stamp}.jsonl.gz"
        self._file = gzip.open(path, "at", encoding="utf-8")
        return self

    def __call__(self, name: str, row: Mapping[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps({"type": name, "row": row}, ensure_ascii=False) + "\n")

    def __exit__(self, *_exc: object) -> None:
        if self._file is not None:
            self._file.close()


class Purger:
    def __init__(
        self,
        store: Store,
        retention_days: float,
        archive_dir: str | None = None,
        metrics: Metrics | None = None,
        delivering: Callable[[], bool] = lambda: False,
    ) -> None:
        """`delivering`: whether the dispatcher has deliveries in hand now (the purge then
        slows down to its share)."""
        self._store = store
        self._days = retention_days
        self._archive_dir = archive_dir
        self._metrics = metrics
        self._delivering = delivering
        # The sweep for events without a delivery: where it goes on (None: not under way),
        # and when it starts over.
        self._sweep_from: int | None = 0
        self._sweep_due_at = 0.0

    async def run(self, stopping: asyncio.Event) -> None:
        """Until stopped: purge everything due, then look again every EVERY_S."""
        if self._days <= 0:
            return  # retention off: keep everything
        while not stopping.is_set():
            try:
                purged = await self.purge_all(stopping)
            except StoreError as error:
                log.warning("retention: %s; trying again later", error)
                purged = 0
            except Exception as error:  # never take the dispatcher down with it
                log.error("retention failed: %s: %.300s", type(error).__name__, error)
                log.debug("retention failed", exc_info=error)
                purged = 0
            if purged:
                log.info("retention: purged %d rows older than their retention", purged)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), EVERY_S)

    async def purge_all(self, stopping: asyncio.Event | None = None) -> int:
        """Batches until nothing is due (or another dispatcher is purging); rows purged."""
        total = 0
        batch_s = GUESSED_BATCH_S
        while stopping is None or not stopping.is_set():
            # The pause comes first: a dispatcher that starts with a backlog delivers before
            # it purges.
            await asyncio.sleep(self._pause(batch_s))
            began = time.monotonic()
            batch = await self._batch()
            batch_s = time.monotonic() - began
            if batch.busy or not (batch.rows or self._sweep_from is not None):
                break
            total += batch.rows
            if self._metrics:
                self._metrics.purged(batch.deliveries, batch.events, batch.other)
        return total

    def _pause(self, batch_s: float) -> float:
        if not self._delivering():
            return BETWEEN_BATCHES_S
        share = SHARE_WHILE_DELIVERING
        return max(BETWEEN_BATCHES_S, batch_s * (1 - share) / share)

    async def _batch(self) -> Purged:
        after = self._sweep_from
        if after is None and time.monotonic() >= self._sweep_due_at:
            after = 0
        if self._archive_dir is None:
            batch = await self._store.purge(self._days, events_after=after)
        else:
            with ArchiveFile(self._archive_dir) as archive:
                batch = await self._store.purge(self._days, archive, events_after=after)
        if after is not None and not batch.busy:
            self._sweep_from = batch.events_after
            if batch.events_after is None:
                self._sweep_due_at = time.monotonic() + SWEEP_EVERY_S
        return batch
