"""The round-trip scenarios: database round trips (counted in-process) and transactions (from
pg_stat_database) per delivered message, one worker draining one webhook channel."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Callable
from typing import Any

from bench import workload
from bench.database import Postgres, drain, states_pg
from bench.result import Result
from bench.rig import Rig
from bench.scenarios.e2e import Drain, run_drain

# Backends flush their pending statistics at most every second (PostgreSQL 15).
STATS_FLUSH_S = 1.2
#: SQLAlchemy event → the count it adds to
COUNTED = (
    ("statements", "before_cursor_execute"),
    ("begins", "begin"),
    ("commits", "commit"),
    ("rollbacks", "rollback"),
)


class Transactions:
    """xact_commit + xact_rollback of one database, and the drain's state polls, which are
    the bench's own transactions and so subtracted."""

    def __init__(self, pg: Postgres, name: str) -> None:
        self.name = name
        self.probe = pg.connect(name)
        self.polls = 0
        self._states = states_pg(pg, name)
        self.before = self.polls_before = 0

    def states(self) -> dict[str, int]:
        self.polls += 1
        return self._states()

    def _total(self) -> int:
        self.probe.execute("SELECT pg_stat_clear_snapshot()")  # a fresh snapshot, not a cached one
        row = self.probe.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (self.name,),
        ).fetchone()
        return int(row[0]) if row else 0

    def mark(self) -> None:
        time.sleep(STATS_FLUSH_S)
        self.before = self._total()
        self.polls_before = self.polls

    def since_mark(self) -> tuple[int, int]:
        """The workers' transactions since `mark()` and the bench's own subtracted from them.
        Called once the workers stopped: they flush their statistics on exit."""
        time.sleep(STATS_FLUSH_S)
        after = self._total()
        # each poll is one autocommit transaction; so are the two statements of each of the
        # two _total() calls (the snapshot clear and the SELECT)
        ours = (self.polls - self.polls_before) + 2 + 2
        return after - self.before - ours, ours


def _transactions(rig: Rig, n: int) -> Result:
    with rig.pg.database() as (name, url):
        xacts = Transactions(rig.pg, name)
        run = Drain(rig.tmp, url, xacts.states, rig.sink, 1, n, n, 1)
        rate, _notes = run_drain(run, before_start=xacts.mark)
        worker_xacts, ours = xacts.since_mark()
    notes = {
        "deliveries": n,
        "worker_transactions": worker_xacts,
        "bench_transactions_subtracted": ours,
        "method": "pg_stat_database.xact_commit+xact_rollback before/after a "
        "1-process drain (includes worker start-up and shutdown)",
        "e2e_rate": round(rate, 1),
    }
    unit = "transactions per delivered message"
    return Result("roundtrips/transactions", worker_xacts / n, unit, "postgresql", notes=notes)


def _counter(counts: dict[str, int], key: str) -> Callable[..., None]:
    def count(conn: Any, *_args: Any, **_kw: Any) -> None:
        # In autocommit (the store's reads and one-statement writes) SQLAlchemy still
        # reports begin and commit, but sends neither.
        level = conn.get_execution_options().get("isolation_level")
        if key == "statements" or level != "AUTOCOMMIT":
            counts[key] += 1

    return count


async def _drain_counted(pg: Postgres, url: str, name: str, n: int) -> dict[str, int]:
    """Drain `n` deliveries with a dispatcher in this process, counting what it sends."""
    from sqlalchemy import event  # these on use: see bench/scenarios/raw.py

    import tidings
    from tidings.channels.registry import Registry, builtin_adapters
    from tidings.dispatch.dispatcher import Dispatcher, DispatcherConfig

    counts = dict.fromkeys((key for key, _ in COUNTED), 0)
    async with tidings.Hub(url) as hub:
        for key, sqlalchemy_event in COUNTED:
            event.listen(hub.store.sync_engine, sqlalchemy_event, _counter(counts, key))
        config = DispatcherConfig(
            worker_id="bench-roundtrips",
            lease_s=120,
            poll_interval_s=1,
            allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
        )
        dispatcher = Dispatcher(hub.store, Registry(builtin_adapters()), config)
        task = asyncio.create_task(dispatcher.run())
        await asyncio.to_thread(drain, states_pg(pg, name), n, 600, 0.05)
        dispatcher.stop()
        await task
    return counts


def _round_trips(rig: Rig, n: int) -> Result:
    import uvloop

    with rig.pg.database() as (name, url):
        hook = workload.webhook("hook-0", rig.sink.url("/hook"))
        asyncio.run(workload.setup(url, [hook]))
        asyncio.run(workload.publish_all(url, [workload.event(i) for i in range(n)]))
        counted = uvloop.run(_drain_counted(rig.pg, url, name, n))
    notes = {
        "deliveries": n,
        **counted,
        "method": "an in-process dispatcher drains the rows while SQLAlchemy's events "
        "count every statement, BEGIN and COMMIT it sends (each one round trip; "
        "prepares of a statement new to a connection are not counted, nor BEGIN and "
        "COMMIT in autocommit, which are not sent)",
    }
    unit = "round trips per delivered message"
    return Result("roundtrips", sum(counted.values()) / n, unit, "postgresql", notes=notes)


def run(rig: Rig) -> list[Result]:
    n = max(1000, rig.counts.e2e // 4)
    transactions = _transactions(rig, n)
    return [_round_trips(rig, n), transactions]
