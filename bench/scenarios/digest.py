"""The digest scenario: a backlog of entries drained by one worker into a WeCom-like robot
that rejects any message over 4,096 bytes; how long it takes, and the worker's peak RSS."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import workload
from bench.database import drain, states_pg
from bench.processes import workers
from bench.result import Result
from bench.rig import Rig

PERIOD_S = 0.2
LIMIT_BYTES = 4096  # bench/sink.py's WeCom route rejects longer content with errcode 40058


def _channel(rig: Rig) -> dict[str, Any]:
    return {
        "name": "wecom-digest",
        "kind": "wecom",
        "config": {"webhook_url": rig.sink.url("/cgi-bin/webhook/send?key=bench")},
        "mode": "digest",
        "digest_period_s": PERIOD_S,
        "rate_per_min": 0,
        "timeout_s": 10,
        "retry_backoff_s": 0.05,
    }


def _results(
    rig: Rig, elapsed: float, final: dict[str, int], rss: int | None, notes: dict[str, Any]
) -> list[Result]:
    entries = rig.counts.digest
    out = [
        Result("digest/drain", elapsed, "s", "postgresql", notes=notes),
        Result(
            "digest/worker-peak-rss",
            (rss or 0) / 1024 if rss else None,
            "MiB (VmHWM)",
            "postgresql",
            notes={"entries": entries},
        ),
    ]
    if final.get("sent", 0) != entries:
        out[0].error = f"not every entry was sent: {final}"
    return out


def run(rig: Rig) -> list[Result]:
    entries = rig.counts.digest
    with rig.pg.database() as (name, url):
        asyncio.run(workload.setup(url, [_channel(rig)]))
        t_pub = time.monotonic()
        asyncio.run(workload.publish_all(url, [workload.event(i) for i in range(entries)]))
        publish_s = time.monotonic() - t_pub
        states = states_pg(rig.pg, name)
        rig.sink.reset()
        with workers(rig.tmp, url, 1, poll_interval_s=1, lease_s=120) as started:
            t0 = started[0].wait_started()
            done_at, final = drain(states, entries, 1800)
            rss = started[0].peak_rss_kib()
        stats = rig.sink.stats()
    elapsed = done_at - t0
    notes = {
        "entries": entries,
        "final_states": final,
        "messages_accepted": stats["count"],
        "messages_rejected_40058": stats["rejected"],
        "publish_s": round(publish_s, 2),
        "entries_per_s": round(entries / elapsed, 1),
        "limit_bytes": LIMIT_BYTES,
        "digest_period_s": PERIOD_S,
    }
    return _results(rig, elapsed, final, rss, notes)
