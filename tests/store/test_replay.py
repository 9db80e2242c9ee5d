"""M3 bulk replay on both backends: a filter's ended rows requeued in pages by id, each
audited, once per request id; a dry run only counts."""

from __future__ import annotations

import pytest

import tidings
from tests.conftest import count
from tests.store.helpers import channel, claim, publish, states
from tidings.core.errors import Conflict
from tidings.core.model import ReplayQuery
from tidings.core.states import Failure, State
from tidings.store import replay


async def _ended(hub: tidings.Hub) -> tuple[tidings.Channel, tidings.Channel]:
    """Channel a: 4 failed permanently, 2 exhausted; channel b: 2 failed, 1 skipped."""
    a = await channel(hub, "a", filter={"kinds": ["a.*"]})
    b = await channel(hub, "b", filter={"kinds": ["b.*"]})
    await publish(hub, 6, kind="a.x")
    await publish(hub, 3, kind="b.x")
    got = await claim(hub, a, limit=4)
    await hub.store.fail(got.token, got.ids, "HTTP 404")
    got = await claim(hub, a, limit=2)
    await hub.store.exhaust(got.token, got.ids, "HTTP 500")
    got = await claim(hub, b, limit=2)
    await hub.store.fail(got.token, got.ids, "HTTP 401")
    await hub.channels.disable(b.id)  # the third is skipped
    return a, b


async def test_m3_a_dry_run_counts_and_changes_nothing(hub: tidings.Hub) -> None:
    a, _ = await _ended(hub)
    before = await states(hub)
    done = await hub.store.replay(ReplayQuery(), "op", "", dry_run=True)
    assert (done.matched, done.requeued, done.dry_run) == (8, 0, True)
    only = ReplayQuery(channel_id=a.id, failure=Failure.EXHAUSTED)
    assert (await hub.store.replay(only, "op", "", dry_run=True)).matched == 2
    both = ReplayQuery(states=frozenset({State.FAILED, State.SKIPPED}), event_kind="b.x")
    assert (await hub.store.replay(both, "op", "", dry_run=True)).matched == 3
    assert await states(hub) == before


async def test_m3_requeues_once_per_request_id_each_row_audited(hub: tidings.Hub) -> None:
    a, _ = await _ended(hub)
    query = ReplayQuery(channel_id=a.id)
    done = await hub.store.replay(query, "alice", "key-1")
    assert (done.matched, done.requeued, done.replayed, done.next_after_id) == (6, 6, False, None)
    rows = [r for r in (await states(hub)).values() if r.channel_id == a.id]
    assert {(r.state, r.attempts, r.failure) for r in rows} == {(State.PENDING, 0, None)}
    assert await count(hub, "resends") == 6
    again = await hub.store.replay(query, "alice", "key-1")
    assert (again.requeued, again.replayed) == (6, True)
    assert await count(hub, "resends") == 6  # nothing requeued twice
    with pytest.raises(Conflict, match="already used"):
        await hub.store.replay(ReplayQuery(tenant="other"), "alice", "key-1")


async def test_m3_pages_by_id(hub: tidings.Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "MAX_PAGE", 3)
    await _ended(hub)
    pages, after = [], 0
    for key in ("k1", "k2", "k3"):
        done = await hub.store.replay(ReplayQuery(after_id=after), "op", key)
        pages.append((done.matched, done.requeued))
        if done.next_after_id is None:
            break
        after = done.next_after_id
    assert pages == [(8, 3), (5, 3), (2, 2)]
    assert await count(hub, "resends") == 8
    assert not [r for r in (await states(hub)).values() if r.state is State.FAILED]
