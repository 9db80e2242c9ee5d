"""One chaos run: start the rig, publish the seeded stream while faults are injected at random
(seeded), heal, wait until every delivery has ended, and hand the ledger its snapshot."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos import faults as fault_tools
from tests.chaos import ledger
from tests.chaos.cluster import Cluster
from tests.chaos.faults import FAULTS, Injected
from tests.chaos.publisher import stream
from tests.chaos.receiver import TAKEN
from tests.chaos.rig import Rig

BATCH = 50


@dataclass
class Plan:
    backend: str
    seed: int
    events: int
    workdir: Path
    faults: tuple[str, ...] = ()  # names from FAULTS; empty: every one that applies
    minutes: float | None = None  # how long faults go on (None: while publishing)
    #: Instead of random faults: these, one at a time in this order (the short subset).
    sequence: tuple[str, ...] = ()
    events_per_s: float = 100.0
    fault_gap_s: tuple[float, float] = (0.5, 2.0)  # pause between two faults of one lane
    lanes: int = 2  # faults running at once (on different resources)
    progress_every_s: float | None = None  # print a line this often (the runner does)
    workers: int = 2
    hold_s: tuple[float, float] = (1.0, 4.0)  # how long a fault lasts
    settle_s: float = 180.0
    cluster: Cluster | None = None  # a running PostgreSQL cluster to use (else its own)
    keep: bool = False  # keep the SQLite file when its disk is unmounted at the end


@dataclass
class Result:
    plan: Plan
    report: ledger.Report
    injected: list[Injected]
    notes: list[str]
    seconds: float
    settle_s: float
    recovery: dict[str, float] = field(default_factory=dict)  # worst per fault type
    publish_failures: int = 0
    start_failures: int = 0

    @property
    def ok(self) -> bool:
        return self.report.lost == 0 and not self.report.violations and not self.notes

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for item in self.injected:
            counts[item.name] = counts.get(item.name, 0) + 1
        return {
            "backend": self.plan.backend,
            "seed": self.plan.seed,
            "events_planned": self.plan.events,
            "seconds": round(self.seconds, 1),
            "settle_s": round(self.settle_s, 1),
            "faults": counts,
            "recovery_s": {k: round(v, 2) for k, v in sorted(self.recovery.items())},
            "publish_failures": self.publish_failures,
            "start_failures": self.start_failures,
            "notes": self.notes,
            "ledger": self.report.summary(),
        }


async def run(plan: Plan) -> Result:
    names = list(plan.faults) or fault_tools.applicable(plan.backend)
    rng = random.Random(plan.seed)
    plan.workdir.mkdir(parents=True, exist_ok=True)
    rig = Rig(plan.backend, plan.workdir, plan.seed, worker_count=plan.workers, hold_s=plan.hold_s)
    started = time.monotonic()
    injected: list[Injected] = []
    try:
        await rig.start()
        stop = asyncio.Event()
        planned = asyncio.Event()
        publishing = asyncio.create_task(_publish(rig, plan, stop, planned))
        progress = None
        if plan.progress_every_s:
            progress = asyncio.create_task(_progress(rig, plan.progress_every_s, injected, stop))
        if plan.sequence:
            await _in_turn(rig, plan, rng, injected)
        else:
            slots = {
                f.resource: asyncio.Semaphore(_capacity(f.resource, plan)) for f in FAULTS.values()
            }
            begun: Counter[str] = Counter()
            lanes = [
                asyncio.create_task(
                    _lane(
                        rig, plan, names, random.Random(rng.random()), slots, stop, injected, begun
                    )
                )
                for _ in range(plan.lanes)
            ]
            if plan.minutes is None:
                await asyncio.wait(
                    [asyncio.create_task(planned.wait()), publishing],
                    return_when=asyncio.FIRST_COMPLETED,
                )
            else:  # the planned time, unless publishing gave up before it (raised below)
                await asyncio.wait([publishing], timeout=plan.minutes * 60)
            stop.set()
            await asyncio.gather(*lanes)
        stop.set()
        await publishing
        if progress is not None:
            await progress
        await rig.heal()
        settle_s = await rig.settle(plan.settle_s)
        assert rig.publisher is not None
        answers = await rig.api_answers()
        await rig.stop_processes()
        if plan.backend == "sqlite":
            check = rig.integrity()
            if check != "ok":
                rig.notes.append(f"SQLite integrity_check at the end: {check}")
        assert rig.secrets is not None
        snap = await asyncio.to_thread(
            ledger.load,
            rig.db_url,
            rig.record,
            acknowledged=rig.publisher.acknowledged,
            logs=rig.logs(),
            answers=answers,
            canaries=rig.secrets.canaries(),
            crashes=[(i.started, i.ended) for i in injected if i.name == "pg_restart_immediate"],
        )
        report = ledger.check(snap)
        result = Result(
            plan,
            report,
            injected,
            rig.notes,
            time.monotonic() - started,
            settle_s,
            publish_failures=rig.publisher.failures,
            start_failures=rig.start_failures,
        )
        result.recovery = recovery(injected, snap.records, snap.events)
        return result
    finally:
        await rig.stop(keep_files=plan.keep)


async def _publish(rig: Rig, plan: Plan, stop: asyncio.Event, planned: asyncio.Event) -> None:
    """The planned events at the planned rate, and more of the stream until the faults end."""
    assert rig.publisher is not None
    events = stream(plan.seed, f"chaos-{plan.seed}")
    loop = asyncio.get_running_loop()
    began = loop.time()
    at = 0
    while at < plan.events or not stop.is_set():
        due = began + at / plan.events_per_s
        await asyncio.sleep(max(0.0, due - loop.time()))
        batch = [next(events) for _ in range(BATCH)]
        if (at // BATCH) % 2:
            # Every other batch one event at a time, as monitoring agents publish: a single
            # publish may hand its rows to a waiting worker (PostgreSQL).
            for event in batch:
                await rig.publisher.publish([event])
        else:
            await rig.publisher.publish(batch)
        at += len(batch)
        if at >= plan.events:
            planned.set()


async def _progress(
    rig: Rig, every_s: float, injected: list[Injected], stop: asyncio.Event
) -> None:
    began = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        published = len(rig.publisher.acknowledged) if rig.publisher else 0
        print(
            f"chaos: {time.monotonic() - began:.0f} s, {published} events published,"
            f" {len(injected)} faults, {len(rig.notes)} notes"
            + (f" (latest: {rig.notes[-1][:200]})" if rig.notes else ""),
            flush=True,
        )


async def _in_turn(rig: Rig, plan: Plan, rng: random.Random, injected: list[Injected]) -> None:
    """Each fault of the sequence alone, with traffic before and after it."""
    for name in plan.sequence:
        await asyncio.sleep(rng.uniform(*plan.fault_gap_s))
        try:
            injected.append(await fault_tools.inject(rig, FAULTS[name], rng))
        except Exception as error:
            rig.notes.append(f"fault {name} could not be injected: {error!r}")
    await asyncio.sleep(rng.uniform(*plan.fault_gap_s))


async def _lane(
    rig: Rig,
    plan: Plan,
    names: list[str],
    rng: random.Random,
    slots: dict[str, asyncio.Semaphore],
    stop: asyncio.Event,
    injected: list[Injected],
    begun: Counter[str],
) -> None:
    """Faults one after another, at random among those whose resource has room and that were
    injected least so far (every type comes up about as often), each holding its place
    while it lasts."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*plan.fault_gap_s))
        if stop.is_set():
            return
        free = [n for n in names if not slots[FAULTS[n].resource].locked()]
        if not free:
            continue
        fewest = min(begun[n] for n in free)
        fault = FAULTS[rng.choice([n for n in free if begun[n] == fewest])]
        begun[fault.name] += 1
        async with slots[fault.resource]:
            try:
                injected.append(await fault_tools.inject(rig, fault, rng))
            except Exception as error:  # a tool that fails is reported, the run goes on
                rig.notes.append(f"fault {fault.name} could not be injected: {error!r}")


def _capacity(resource: str, plan: Plan) -> int:
    """How many faults a resource takes at once: one per worker (each picks a worker no
    other fault holds), one for everything else (the database, the network, ...)."""
    return plan.workers if resource == "workers" else 1


def recovery(
    injected: list[Injected], records: list[dict[str, Any]], events: dict[int, dict[str, Any]]
) -> dict[str, float]:
    """For each fault type, the longest time from a fault's end until a message of an event
    published after that end was taken: the whole path (publish, claim, send) works again.

    Faults that overlap it (a receiver down while the database restarts, say) may lengthen
    it; none is chained through, so a run with several faults at once still shows each
    type's own figure.
    """
    fresh: list[tuple[float, float]] = []  # (newest event's publish time, taken at)
    for r in records:
        created = [events[e]["created"] for e in r.get("events", ()) if e in events]
        if r["answer"] in TAKEN and created:
            fresh.append((max(created), r["t"]))
    fresh.sort()
    published = [p for p, _ in fresh]
    # first_taken[i]: the earliest time a message of an event published at published[i] or
    # later was taken.
    first_taken = [t for _, t in fresh]
    for i in range(len(first_taken) - 2, -1, -1):
        first_taken[i] = min(first_taken[i], first_taken[i + 1])
    worst: dict[str, float] = {}
    for item in injected:
        at = bisect.bisect_right(published, item.ended)
        if at < len(first_taken):
            worst[item.name] = max(worst.get(item.name, 0.0), first_taken[at] - item.ended)
    return worst
