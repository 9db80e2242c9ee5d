"""Retention inside the dispatchers (R1): purge in small batches what has outlived its
retention, one dispatcher at a time cluster-wide (the store takes the turn), archived first
when an archive directory is set. A short pause between batches leaves claims their room.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
from collections.abc import Mapping
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
#: The pause between two batches of one purge.
BETWEEN_BATCHES_S = 0.05


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
    ) -> None:
        self._store = store
        self._days = retention_days
        self._archive_dir = archive_dir
        self._metrics = metrics

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
        while stopping is None or not stopping.is_set():
            batch = await self._batch()
            if batch.busy or not batch.rows:
                break
            total += batch.rows
            if self._metrics:
                self._metrics.purged(batch.deliveries, batch.events, batch.other)
            await asyncio.sleep(BETWEEN_BATCHES_S)
        return total

    async def _batch(self) -> Purged:
        if self._archive_dir is None:
            return await self._store.purge(self._days)
        with ArchiveFile(self._archive_dir) as archive:
            return await self._store.purge(self._days, archive)
