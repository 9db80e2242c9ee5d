"""D1–D5 end to end: a digest larger than the channel's limit goes out as several messages."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

import tidings
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Answer, Sink
from tidings.core.states import AttemptStatus, State
from tidings.dispatch import sending

LIMIT = 8192


async def digest_webhook(hub: tidings.Hub, sink: Sink, **fields: Any) -> tidings.Channel:
    """A digest channel posting to the sink's /digest path."""
    return await webhook(hub, sink.url("/digest"), name="digest", mode="digest", **fields)


async def test_digest_over_the_limit_is_split_at_entry_boundaries(
    hub: tidings.Hub, sink: Sink
) -> None:
    ch = await digest_webhook(
        hub,
        sink,
        digest_period_s=1.0,
        config={"max_body_bytes": LIMIT},
    )
    published = await hub.publish_many(
        [
            {
                "kind": "finding.created",
                "subject": f"finding:{i}",
                "title": f"finding {i}",
                "body": "x" * 400,
            }
            for i in range(60)
        ]
    )
    async with running(hub):
        rows = await settled(hub, 60, timeout_s=30)

    messages = list(sink.requests("/digest"))
    assert len(messages) > 1
    assert all(len(m.body) <= LIMIT for m in messages)
    seen = [e["id"] for m in messages for e in json.loads(m.body)["events"]]
    assert sorted(seen) == sorted(p.event.id for p in published)  # every event exactly once
    assert seen == sorted(seen)  # oldest first, across messages
    assert {r.state for r in rows} == {State.SENT}
    assert {r.attempts for r in rows} == {1}  # deferral spent no attempts
    assert all(r.batch_id is not None for r in rows)
    assert all(json.loads(m.body)["type"] == "digest" for m in messages)
    assert len({m.headers["webhook-id"] for m in messages}) == len(messages)
    assert all(json.loads(m.body)["channel"] == ch.name for m in messages)
    numbering = [(json.loads(m.body)["part"], json.loads(m.body)["parts"]) for m in messages]
    assert numbering == [(i, len(messages)) for i in range(1, len(messages) + 1)]


async def test_a_single_entry_too_long_is_shortened_not_dropped(
    hub: tidings.Hub, sink: Sink
) -> None:
    await digest_webhook(
        hub,
        sink,
        digest_period_s=0.5,
        config={"max_body_bytes": 2048},
    )
    await hub.publish(kind="finding.created", subject="big", title="huge", body="y" * 10_000)
    async with running(hub):
        (row,) = await settled(hub, 1)
    (message,) = sink.requests("/digest")
    assert len(message.body) <= 2048
    (entry,) = json.loads(message.body)["events"]
    assert entry["title"] == "huge"
    assert entry["body"].endswith("…")
    assert row.state is State.SENT


async def test_realtime_event_over_the_limit_is_shortened(hub: tidings.Hub, sink: Sink) -> None:
    await webhook(hub, sink.url("/hook"), config={"max_body_bytes": 2048})
    await hub.publish(
        kind="a.b", subject="big", title="keep me", body="z" * 10_000, data={"blob": "w" * 5000}
    )
    async with running(hub):
        (row,) = await settled(hub, 1)
    (got,) = sink.requests("/hook")
    assert len(got.body) <= 2048
    event = json.loads(got.body)["event"]
    assert event["title"] == "keep me"
    assert row.state is State.SENT


async def test_each_digest_message_spends_a_token_and_the_rest_wait(
    hub: tidings.Hub, sink: Sink
) -> None:
    """D4/D5: with one token a minute, one message goes now; the rest stay pending, unspent."""
    await digest_webhook(
        hub,
        sink,
        digest_period_s=0.2,
        rate_per_min=1,
        config={"max_body_bytes": 2048},
    )
    await hub.publish_many(
        [{"kind": "a.b", "subject": f"s{i}", "body": "x" * 400} for i in range(12)]
    )
    async with running(hub):
        await sink.await_for(1, "/digest")
    # Stopped: the claim has recorded its one message and given the rest back.
    (message,) = sink.requests("/digest")
    sent_ids = {e["id"] for e in json.loads(message.body)["events"]}
    rows = (await hub.deliveries(page_size=200)).items
    sent = [v.delivery for v in rows if v.delivery.state is State.SENT]
    waiting = [v.delivery for v in rows if v.delivery.state is State.PENDING]
    assert len(sent) == len(sent_ids) < 12
    assert len(waiting) == 12 - len(sent)
    assert {d.attempts for d in waiting} == {0}


async def test_parts_that_could_outlive_the_lease_are_given_back_not_sent_twice(
    hub: tidings.Hub, sink: Sink
) -> None:
    # Ten parts at 0.7 s each outlast the 6 s lease: sent regardless, the last parts would
    # also go out from the other dispatcher once the lease had ended. The timeout leaves
    # 0.8 s of slack over the answer's delay, so a slow moment cannot turn a part that was
    # received into a timed-out one (retried: sent twice for another reason).
    sink.default("/digest", Answer(200, delay_s=0.7))
    await digest_webhook(
        hub,
        sink,
        digest_period_s=0.5,
        timeout_s=1.5,
        config={"max_body_bytes": 4096},
    )
    published = await hub.publish_many(
        [{"kind": "finding.created", "subject": f"f:{i}", "body": "x" * 400} for i in range(60)]
    )
    async with (
        running(hub, worker_id="a", lease_s=6.0),
        running(hub, worker_id="b", lease_s=6.0),
    ):
        rows = await settled(hub, 60, timeout_s=60)
    messages = sink.requests("/digest")
    seen = [e["id"] for m in messages for e in json.loads(m.body)["events"]]
    history = await _attempts_of(hub, [r for r in rows if r.attempts != 1])
    assert sorted(seen) == sorted(p.event.id for p in published), history  # each exactly once
    assert {r.state for r in rows} == {State.SENT}
    assert {r.attempts for r in rows} == {1}, history  # given back with the attempt revoked
    parts = [json.loads(m.body)["part"] for m in messages]
    assert max(parts) > 1  # a claim sends more than one part before giving the rest back


async def _attempts_of(hub: tidings.Hub, rows: list[tidings.Delivery]) -> list[str]:
    """Each row's attempts, to tell a failure's cause (a timeout, a lost lease)."""
    lines = []
    for row in rows:
        detail = await hub.delivery(row.id)
        for a in detail.attempts_log:
            lines.append(f"{row.id}: {a.worker_id} {a.status.value} {a.error or ''}")
    return lines


async def test_an_entry_that_joined_a_failing_digest_late_keeps_its_own_attempts(
    hub: tidings.Hub, sink: Sink
) -> None:
    """O2 per delivery: a digest's older entry has one attempt left, a younger one (joined
    the batch late) all of them; when the message fails, the older entry ends exhausted and
    the younger one is retried, and sent by the next message."""
    sink.script("/digest", Answer(500, "down"))
    await digest_webhook(hub, sink, digest_period_s=0.2, max_attempts=2, retry_backoff_s=0.05)
    first, _ = await hub.publish_many([{"kind": "a.b", "subject": s} for s in ("old", "young")])
    async with hub.store.engine.begin() as conn:  # its first try already failed
        await conn.execute(
            text("UPDATE deliveries SET attempts = 1 WHERE id = :id"),
            {"id": first.deliveries[0].id},
        )
    async with running(hub):
        old, young = await settled(hub, 2, timeout_s=30)
    sizes = [len(json.loads(m.body)["events"]) for m in sink.requests("/digest")]
    assert sizes == [2, 1]
    assert (old.state, old.failure, old.attempts) == (State.FAILED, "exhausted", 2)
    assert (young.state, young.attempts) == (State.SENT, 2)


async def test_w3_a_digest_part_cut_by_the_grace_period_is_an_audited_attempt(
    hub: tidings.Hub, sink: Sink
) -> None:
    """A digest message that reached a receiver which never answers, when the grace period
    ends: each of its entries keeps the attempt, with its audit row, and is retried."""
    sink.default("/digest", Answer(200, hang=True))
    await digest_webhook(hub, sink, digest_period_s=0.2)
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(4)])
    async with running(hub, grace_s=0.3):
        await sink.await_for(1, "/digest")
    rows = [v.delivery for v in (await hub.deliveries()).items]
    assert [(r.state, r.attempts) for r in rows] == [(State.PENDING, 1)] * 4
    for row in rows:
        log = (await hub.delivery(row.id)).attempts_log
        assert [(a.status, a.error) for a in log] == [
            (AttemptStatus.RETRYABLE, sending.INTERRUPTED_ERROR)
        ]
