"""The faults, each an async function of the rig and a seeded random source that injects one
fault and heals it before it returns. `FAULTS` names them, with the backends they apply to
and the resource they hold (two faults on one resource never overlap; others may)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from tests.chaos import disk, procs, tls
from tests.chaos.cluster import LISTEN_APP
from tests.chaos.publisher import CHANNELS
from tests.chaos.rig import LEASE_S, Rig

FaultFn = Callable[[Rig, random.Random], Awaitable[str]]
BOTH = ("postgresql", "sqlite")
PG = ("postgresql",)
SQLITE = ("sqlite",)
SKEWED = "skewed"
#: The longest a worker fault waits for a worker that no other fault holds (nor is starting).
WORKER_WAIT_S = 120.0
#: The longest a disk stays full waiting for a write to be refused.
DISK_FULL_LONGEST_S = 30.0


@dataclass(frozen=True)
class Fault:
    name: str
    backends: tuple[str, ...]
    resource: str
    run: FaultFn


@dataclass
class Injected:
    name: str
    started: float  # wall time
    ended: float  # wall time the fault was healed
    detail: str


@contextlib.asynccontextmanager
async def _one_worker(rig: Rig, rng: random.Random) -> AsyncIterator[procs.Proc]:
    """One of the regular workers that no other fault holds and that is not starting (a
    skewed one belongs to its own fault while it lasts), held by this fault until it ends:
    faults on two workers may overlap, never two on one."""
    deadline = time.monotonic() + WORKER_WAIT_S
    while True:
        regular = [w for w in rig.workers if not w.name.startswith(SKEWED)]
        free = [w for w in regular if w.name not in rig.faulted and w.alive]
        if free:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"no worker free for {WORKER_WAIT_S:g} s")
        await asyncio.sleep(0.2)
    worker = rng.choice(free)
    rig.faulted.add(worker.name)
    try:
        yield worker
    finally:
        rig.faulted.discard(worker.name)


async def worker_kill9(rig: Rig, rng: random.Random) -> str:
    async with _one_worker(rig, rng) as worker:
        await asyncio.sleep(rng.uniform(0, 0.5))
        worker.kill()
        await rig.replace_worker(worker)
        return worker.name


async def worker_stop(rig: Rig, rng: random.Random) -> str:
    """SIGSTOP past the lease, then SIGCONT: its late writes must be fenced."""
    async with _one_worker(rig, rng) as worker:
        worker.signal(signal.SIGSTOP)
        await asyncio.sleep(LEASE_S + rng.uniform(0.5, 2.0))
        worker.signal(signal.SIGCONT)
        return worker.name


async def worker_term(rig: Rig, rng: random.Random) -> str:
    """SIGTERM mid-burst: exit 0 within 30 s, unsent leases handed back."""
    async with _one_worker(rig, rng) as worker:
        worker.signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 30)
        if code != 0:
            rig.notes.append(f"W3: {worker.name} answered SIGTERM with exit {code}")
            worker.kill()
        await rig.replace_worker(worker)
        return f"{worker.name} exit {code}"


async def pg_restart_fast(rig: Rig, rng: random.Random) -> str:
    assert rig.cluster is not None
    await asyncio.to_thread(rig.cluster.restart, "fast")
    return "fast"


async def pg_restart_immediate(rig: Rig, rng: random.Random) -> str:
    assert rig.cluster is not None
    await asyncio.to_thread(rig.cluster.restart, "immediate")
    return "immediate"


async def pg_kill_listen(rig: Rig, rng: random.Random) -> str:
    assert rig.cluster is not None
    killed = await asyncio.to_thread(rig.cluster.terminate, LISTEN_APP)
    return f"{killed} LISTEN connection(s)"


async def pg_kill_backends(rig: Rig, rng: random.Random) -> str:
    assert rig.cluster is not None
    killed = await asyncio.to_thread(rig.cluster.terminate, None, rig.database)
    return f"{killed} connection(s)"


async def pg_exhaust(rig: Rig, rng: random.Random) -> str:
    assert rig.cluster is not None
    held = await asyncio.to_thread(rig.cluster.exhaust)
    await asyncio.sleep(rig.hold(rng))
    await asyncio.to_thread(rig.cluster.release)
    return f"{held} slots held"


def _network(mode: str) -> FaultFn:
    async def fault(rig: Rig, rng: random.Random) -> str:
        assert rig.proxy is not None
        await asyncio.to_thread(rig.proxy.set, mode)
        await asyncio.sleep(rig.hold(rng))
        await asyncio.to_thread(rig.proxy.heal)
        return mode

    fault.__name__ = f"net_{mode}"
    return fault


def _receiver(mode: str, longest_s: float | None = None) -> FaultFn:
    async def fault(rig: Rig, rng: random.Random) -> str:
        path = rng.choice([None, *(plan.path for plan in CHANNELS)])
        await asyncio.to_thread(procs.control, rig.receiver_port, mode, path)
        await asyncio.sleep(rig.hold(rng) if longest_s is None else rng.uniform(0.1, longest_s))
        await asyncio.to_thread(procs.control, rig.receiver_port, "ok")
        return f"{mode} on {path or 'every path'}"

    fault.__name__ = f"rx_{mode}"
    return fault


async def rx_tls(rig: Rig, rng: random.Random) -> str:
    """The TLS port shows a certificate the sender must refuse, then the good one again."""
    mode = rng.choice([f"tls_{name}" for name in tls.BAD_CERTIFICATES])
    await asyncio.to_thread(procs.control, rig.receiver_port, mode)
    await asyncio.sleep(rig.hold(rng))
    await asyncio.to_thread(procs.control, rig.receiver_port, "ok")
    return mode


async def rx_down(rig: Rig, rng: random.Random) -> str:
    """kill -9 of the receiver, down long enough to open the breaker (5 failures), back."""
    assert rig.receiver is not None
    rig.receiver.kill()
    await asyncio.sleep(rig.hold(rng))
    await rig.supervise(rig.receiver)
    return "down"


async def serve_kill9(rig: Rig, rng: random.Random) -> str:
    """kill -9 of `serve` during a write burst, a restart, then PRAGMA integrity_check."""
    assert rig.serve is not None
    await asyncio.sleep(rng.uniform(0, 0.5))
    rig.serve.kill()
    # Restarted first: the check reads a file of hundreds of MiB late in a run, and while it
    # ran the API was down (with a fault every few seconds, publishing stopped for minutes).
    # A reader sees the file as the crash left it plus what committed since, each intact.
    await rig.supervise(rig.serve)
    result = await asyncio.to_thread(rig.integrity)
    if result != "ok":
        rig.notes.append(f"SQLite integrity_check after kill -9 of serve: {result}")
    return f"integrity_check {result}"


async def disk_full(rig: Rig, rng: random.Random) -> str:
    """The SQLite file's disk full to the last byte until a publish is refused (SQLite fails
    only once its write-ahead log must grow) or DISK_FULL_LONGEST_S pass, then room again;
    the file must pass PRAGMA integrity_check afterwards."""
    if rig.disk is None:
        raise RuntimeError(f"no disk of its own for the SQLite file: {disk.available()}")
    assert rig.publisher is not None
    refused_before = rig.publisher.failures
    taken = await asyncio.to_thread(rig.disk.fill)
    began = time.monotonic()
    await asyncio.sleep(rig.hold(rng))
    if rig.publisher.failures == refused_before:
        rig.publisher.refused.clear()
        with contextlib.suppress(TimeoutError):
            left = DISK_FULL_LONGEST_S - (time.monotonic() - began)
            await asyncio.wait_for(rig.publisher.refused.wait(), max(0.0, left))
    rig.disk.free()
    refused = rig.publisher.failures - refused_before
    result = await asyncio.to_thread(rig.integrity)
    if result != "ok":
        rig.notes.append(f"SQLite integrity_check after a full disk: {result}")
    answer = rig.publisher.last_refusal if refused else ""
    return (
        f"{taken // 2**20} MiB taken, {refused} publish(es) refused ({answer}),"
        f" integrity_check {result}"
    )


async def clock_skew(rig: Rig, rng: random.Random) -> str:
    """One more worker whose wall clock is minutes off, for a while: the database's clock
    decides leases and due times, so it must neither steal live leases nor sit idle."""
    skew = rng.choice((-1, 1)) * rng.uniform(60, 600)
    worker = await rig.start_worker(f"{SKEWED}{len(rig.retired) + len(rig.workers)}", skew)
    await asyncio.sleep(2 * rig.hold(rng))
    worker.signal(signal.SIGTERM)
    code = await asyncio.to_thread(worker.wait, 30)
    if code != 0:
        rig.notes.append(f"W3: skewed worker {worker.name} answered SIGTERM with {code}")
        worker.kill()
    rig.workers.remove(worker)
    rig.retired.append(worker)
    return f"{skew:+.0f} s"


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("worker_kill9", BOTH, "workers", worker_kill9),
        Fault("worker_stop", BOTH, "workers", worker_stop),
        Fault("worker_term", BOTH, "workers", worker_term),
        Fault("pg_restart_fast", PG, "database", pg_restart_fast),
        Fault("pg_restart_immediate", PG, "database", pg_restart_immediate),
        Fault("pg_kill_listen", PG, "database", pg_kill_listen),
        Fault("pg_kill_backends", PG, "database", pg_kill_backends),
        Fault("pg_exhaust", PG, "database", pg_exhaust),
        Fault("net_drop", PG, "network", _network("drop")),
        Fault("net_blackhole", PG, "network", _network("blackhole")),
        Fault("net_delay", PG, "network", _network("delay")),
        Fault("net_half_close", PG, "network", _network("half_close")),
        Fault("rx_error", BOTH, "receiver", _receiver("error")),
        Fault("rx_throttle", BOTH, "receiver", _receiver("throttle")),
        Fault("rx_hang", BOTH, "receiver", _receiver("hang")),
        Fault("rx_reset", BOTH, "receiver", _receiver("reset")),
        Fault("rx_drip", BOTH, "receiver", _receiver("drip")),
        Fault("rx_huge", BOTH, "receiver", _receiver("huge")),
        Fault("rx_redirect", BOTH, "receiver", _receiver("redirect", longest_s=0.5)),
        Fault("rx_tls", BOTH, "receiver", rx_tls),
        Fault("rx_down", BOTH, "receiver", rx_down),
        Fault("serve_kill9", SQLITE, "serve", serve_kill9),
        Fault("disk_full", SQLITE, "disk", disk_full),
        Fault("clock_skew", PG, "clock", clock_skew),
    )
}


def applicable(backend: str) -> list[str]:
    return [name for name, fault in FAULTS.items() if backend in fault.backends]


async def inject(rig: Rig, fault: Fault, rng: random.Random) -> Injected:
    started = time.time()
    detail = await fault.run(rig, rng)
    return Injected(fault.name, started, time.time(), detail)
