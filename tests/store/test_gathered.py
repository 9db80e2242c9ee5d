"""`Gathered` on its own: who runs a group, what goes together, what a cancel does."""

from __future__ import annotations

import asyncio

import pytest

from tidings.store.gather import Gathered


class Recorder:
    """A `run` that answers each item doubled and records each call's items and task; it
    holds each call until `release` is set, when one is given."""

    def __init__(self, release: asyncio.Event | None = None) -> None:
        self.calls: list[list[int]] = []
        self.tasks: list[asyncio.Task[object] | None] = []
        self.release = release
        self.started = asyncio.Event()

    async def __call__(self, items: list[int]) -> list[int | Exception]:
        self.calls.append(items)
        self.tasks.append(asyncio.current_task())
        self.started.set()
        if self.release is not None:
            await self.release.wait()
        return [ValueError(f"odd {i}") if i % 2 else i * 2 for i in items]


async def test_a_lone_caller_runs_its_item_in_its_own_task() -> None:
    run = Recorder()
    gathered = Gathered(run, max_items=10)
    assert await gathered(4) == 8
    assert run.calls == [[4]]
    assert run.tasks == [asyncio.current_task()]


async def test_a_lone_callers_own_error_is_raised_to_it() -> None:
    gathered = Gathered(Recorder(), max_items=10)
    with pytest.raises(ValueError, match="odd 3"):
        await gathered(3)
    assert await gathered(2) == 4  # and the next caller goes alone again


async def test_callers_of_one_turn_go_together_the_first_one_first() -> None:
    run = Recorder()
    gathered = Gathered(run, max_items=10)
    answers = await asyncio.gather(*(gathered(i) for i in (2, 4, 6)))
    assert answers == [4, 8, 12]
    assert run.calls == [[2, 4, 6]]
    assert run.tasks[0] is not asyncio.current_task()


async def _turn_of_the_run(alone: bool) -> list[str]:
    """What ran by the time a lone caller had its answer: its `run`, and a callback already
    due in the next turn of the loop, in order."""
    order: list[str] = []

    async def run(items: list[int]) -> list[int | Exception]:
        order.append("run")
        return items

    asyncio.get_running_loop().call_soon(order.append, "next turn")
    assert await Gathered(run, max_items=10)(1, alone=alone) == 1
    return order


async def test_a_lone_caller_waits_a_turn_for_company_unless_it_knows_it_is_alone() -> None:
    assert await _turn_of_the_run(alone=False) == ["next turn", "run"]
    assert await _turn_of_the_run(alone=True) == ["run"]  # answered within its own turn


async def test_a_caller_that_says_it_is_alone_still_waits_for_a_group_under_way() -> None:
    run, gathered, release, first = await one_in_flight()
    later = asyncio.create_task(gathered(4, alone=True))
    await asyncio.sleep(0.01)
    assert run.calls == [[2]]  # not beside the group that runs
    release.set()
    assert await first == 4
    assert await later == 8
    assert run.calls == [[2], [4]]


async def one_in_flight() -> tuple[
    Recorder, Gathered[int, int], asyncio.Event, asyncio.Future[int]
]:
    """A lone caller's item (2) running, held until the event is set."""
    release = asyncio.Event()
    run = Recorder(release)
    gathered: Gathered[int, int] = Gathered(run, max_items=10)
    first = asyncio.ensure_future(gathered(2))
    await run.started.wait()
    return run, gathered, release, first


async def test_callers_that_come_while_a_lone_one_runs_wait_for_it() -> None:
    run, gathered, release, first = await one_in_flight()
    later = [asyncio.ensure_future(gathered(i)) for i in (4, 6)]
    await asyncio.sleep(0)
    assert run.calls == [[2]]  # in flight: one at a time
    release.set()
    assert await asyncio.gather(first, *later) == [4, 8, 12]
    assert run.calls == [[2], [4, 6]]


async def test_a_lone_caller_cancelled_before_its_item_goes_leaves_it_out() -> None:
    run = Recorder()
    gathered = Gathered(run, max_items=10)
    lone = asyncio.ensure_future(gathered(2))
    await asyncio.sleep(0)  # it waits for the others of its turn
    lone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lone
    assert run.calls == []
    assert await gathered(4) == 8
    assert run.calls == [[4]]


async def test_a_lone_caller_cancelled_mid_run_lets_the_waiting_go() -> None:
    run, gathered, release, lone = await one_in_flight()
    waiting = asyncio.ensure_future(gathered(4))
    await asyncio.sleep(0)
    lone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lone
    release.set()
    assert await waiting == 8
    assert run.calls == [[2], [4]]
