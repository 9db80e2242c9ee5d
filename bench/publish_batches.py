"""Batches of 1,000 events through the library, in a process of their own so the garbage
collector's state is the publisher's alone: `python -m bench.publish_batches URL BATCHES
[--settle]` prints events/s. With `--settle` the process calls `tidings.settle_heap()` once
after start-up, as tidings' own processes do."""

from __future__ import annotations

import asyncio
import sys
import time

import tidings
from bench.workload import event


async def batches_per_s(url: str, batches: int) -> float:
    async with tidings.Hub(url) as hub:
        batch = [event(i) for i in range(1000)]
        await hub.publish_many(batch)  # warm-up (connection, statements)
        started = time.perf_counter()
        for _ in range(batches):
            await hub.publish_many(batch)
        return batches * 1000 / (time.perf_counter() - started)


def main(argv: list[str]) -> int:
    url, batches = argv[0], int(argv[1])
    if "--settle" in argv:
        tidings.settle_heap()
    print(f"{asyncio.run(batches_per_s(url, batches)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
