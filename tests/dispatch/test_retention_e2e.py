"""R1 inside a real worker process: what outlived its retention is purged (archived first),
live rows stay; and by hand with `tidings purge` and `tidings archive`."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update

import tidings
from tests.dispatch.helpers import eventually, settled, webhook
from tests.dispatch.workers import workers
from tests.sink import Sink
from tidings.core.states import State
from tidings.store.schema import deliveries, events

SECRET = "whsec_" + "cmV0ZW50aW9uLWNhbmFyeS1zZWNyZXQ="


async def _old_history(hub: tidings.Hub, sink: Sink) -> tidings.Channel:
    """Three deliveries sent 40 days ago (by a worker that has since gone)."""
    hook = await webhook(hub, sink.url("/hook"), timeout_s=0.5, config={"secret": SECRET})
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(3)])
    claim = await hub.store.claim_realtime(hook.id, 10, 60, "w")
    assert claim is not None
    await hub.store.mark_sent(claim.token, claim.ids)
    then = datetime.now(UTC) - timedelta(days=40)
    async with hub.store.engine.begin() as conn:
        await conn.execute(update(deliveries).values(created_at=then))
        await conn.execute(update(events).values(created_at=then))
    return hook


async def test_r1_a_worker_purges_and_archives_what_outlived_its_retention(
    hub: tidings.Hub, sink: Sink, db_url: str, tmp_path: Path
) -> None:
    await _old_history(hub, sink)
    await hub.publish(kind="a.b", subject="today")
    archive = tmp_path / "archive"
    with workers(tmp_path, db_url, "w", retention_days=30, retention_archive_dir=archive):

        async def purged() -> bool:
            return (await hub.deliveries()).total == 1

        await eventually(purged, timeout_s=20, what="the old rows purged")
        (today,) = await settled(hub, 1)
    assert today.state is State.SENT
    lines = [doc for path in archive.glob("tidings-archive-*.jsonl.gz") for doc in _read(path)]
    assert sorted(d["type"] for d in lines) == ["delivery"] * 3 + ["event"] * 3
    assert SECRET not in json.dumps(lines)


async def test_r1_purge_and_archive_by_hand(
    hub: tidings.Hub, sink: Sink, db_url: str, tmp_path: Path
) -> None:
    await _old_history(hub, sink)
    out = tmp_path / "before.jsonl.gz"
    before = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    done = await _cli("archive", "--before", before, "--out", str(out), "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert "wrote 6 rows" in done.stdout
    kinds = [doc["type"] for doc in _read(out)]
    assert sorted(kinds) == ["delivery"] * 3 + ["event"] * 3
    again = await _cli("archive", "--before", before, "--out", str(out), "--db", db_url)
    assert again.returncode != 0
    assert "exists" in again.stderr
    dry = await _cli("purge", "--dry-run", "--db", db_url)
    assert dry.returncode == 0, dry.stderr
    assert "hook" in dry.stdout
    assert (await hub.deliveries()).total == 3  # a dry run deletes nothing
    real = await _cli("purge", "--db", db_url)
    assert real.returncode == 0, real.stderr
    assert "purged 6 rows" in real.stdout
    assert (await hub.deliveries()).total == 0


def _read(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file]


async def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tidings", *args]
    return await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, timeout=60
    )
