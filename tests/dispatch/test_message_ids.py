"""N1: the id receivers see (`webhook-id`) is unique across databases and kept across retries,
for single events, digest parts and test sends alike, on both backends."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import tidings
from tests.dispatch.helpers import LOOPBACK, running, settled, webhook
from tests.sink import Answer, Sink
from tidings.core.states import State
from tidings.service import Service

MESSAGE_ID = re.compile(r"msg_[0-9a-f]{32}")


async def test_n1_the_stored_id_is_sent_and_kept_across_retries(
    hub: tidings.Hub, sink: Sink
) -> None:
    sink.script("/hook", Answer(500, "boom"), Answer(200, "ok"))
    await webhook(hub, sink.url("/hook"), max_attempts=3)
    published = await hub.publish(kind="monitor.down", subject="m:1")
    stored = published.deliveries[0].message_id
    assert MESSAGE_ID.fullmatch(stored)
    async with running(hub):
        (row,) = await settled(hub, 1)
    assert (row.state, row.attempts, row.message_id) == (State.SENT, 2, stored)
    assert [r.headers["webhook-id"] for r in sink.requests("/hook")] == [stored, stored]


async def test_n1_every_delivery_of_a_batch_gets_its_own_id(hub: tidings.Hub, sink: Sink) -> None:
    await webhook(hub, sink.url("/a"), name="a")
    await webhook(hub, sink.url("/b"), name="b")
    results = await hub.publish_many([{"kind": "k.x", "subject": f"s{i}"} for i in range(300)])
    ids = [d.message_id for r in results for d in r.deliveries]
    assert len(ids) == 600
    assert len(set(ids)) == 600
    assert all(MESSAGE_ID.fullmatch(i) for i in ids)
    page = await hub.deliveries(page_size=200)
    assert {v.delivery.message_id for v in page.items} <= set(ids)  # as stored


async def test_n1_two_databases_send_different_ids_for_the_same_rows(
    hub: tidings.Hub, sink: Sink, sqlite_template: Path, tmp_path: Path
) -> None:
    """A staging and a production tidings (or one restored from a backup) number their rows
    alike; a receiver that drops repeated ids must still get every message of both."""
    other_path = tmp_path / "other.db"
    shutil.copy(sqlite_template, other_path)
    async with tidings.Hub(f"sqlite:///{other_path}") as other:
        for each in (hub, other):
            await webhook(each, sink.url("/hook"))
            await each.publish(kind="monitor.down", subject="m:1")
            async with running(each):
                (row,) = await settled(each, 1)
            assert row.state is State.SENT
    first, second = sink.requests("/hook")
    assert first.headers["webhook-id"] != second.headers["webhook-id"]


async def test_n1_a_restored_backup_does_not_repeat_ids(
    tmp_path: Path, sqlite_template: Path
) -> None:
    live = tmp_path / "live.db"
    shutil.copy(sqlite_template, live)
    async with tidings.Hub(f"sqlite:///{live}") as hub:
        await hub.channels.create(name="ops", kind="inbox")
    backup = tmp_path / "backup.db"
    shutil.copy(live, backup)
    sent: list[tuple[int, str]] = []
    for path in (live, backup):  # the same next row id in both
        async with tidings.Hub(f"sqlite:///{path}") as hub:
            (delivery,) = (await hub.publish(kind="a.b", subject="s")).deliveries
            sent.append((delivery.id, delivery.message_id))
    assert sent[0][0] == sent[1][0]
    assert sent[0][1] != sent[1][1]


async def test_n1_each_test_send_has_its_own_id(hub: tidings.Hub, sink: Sink) -> None:
    channel = await webhook(hub, sink.url("/hook"))
    service = Service(hub, allowed_networks=LOOPBACK)
    await service.test_channel(channel.id)
    await service.test_channel(channel.id)
    ids = [r.headers["webhook-id"] for r in sink.requests("/hook")]
    assert len(ids) == 2
    assert ids[0] != ids[1]
    assert all(MESSAGE_ID.fullmatch(i) for i in ids)


async def test_n1_a_digest_keeps_its_id_across_retries_and_differs_by_entries(
    hub: tidings.Hub, sink: Sink
) -> None:
    sink.script("/digest", Answer(500, "boom"), Answer(200, "ok"), Answer(200, "ok"))
    await webhook(
        hub, sink.url("/digest"), name="digest", mode="digest", digest_period_s=0.2, max_attempts=3
    )
    first = await hub.publish_many([{"kind": "k.x", "subject": f"s{i}"} for i in range(3)])
    async with running(hub):
        await settled(hub, 3)
        later = await hub.publish(kind="k.x", subject="later")
        await settled(hub, 4)
    got = [r.headers["webhook-id"] for r in sink.requests("/digest")]
    assert len(got) == 3
    assert got[0] == got[1]  # the same three entries, retried
    assert got[2] != got[0]  # another message
    entry_ids = {d.message_id for r in first for d in r.deliveries}
    assert got[0] not in entry_ids  # a digest's id is its own, derived from its entries
    assert MESSAGE_ID.fullmatch(got[0])
    assert later.deliveries[0].message_id != got[2]
