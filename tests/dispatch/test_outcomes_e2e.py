"""O1–O5 end to end: a real dispatcher posting to a real HTTP sink, on both backends."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from sqlalchemy import update

import tidings
from tests.dispatch.helpers import eventually, running, settled, webhook
from tests.sink import Answer, Sink
from tidings.channels import signing
from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.registry import Registry, builtin_adapters
from tidings.core import validate
from tidings.core.errors import ConfigError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome
from tidings.core.states import AttemptStatus, Failure, State
from tidings.dispatch import Dispatcher, DispatcherConfig, sending
from tidings.store.schema import deliveries


async def test_o2_500_500_200_is_sent_after_three_attempts(hub: tidings.Hub, sink: Sink) -> None:
    sink.script("/hook", Answer(500, "boom 1"), Answer(500, "boom 2"), Answer(200, "ok"))
    await webhook(hub, sink.url("/hook"), max_attempts=3)
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="m:1", title="down")
        (row,) = await settled(hub, 1)
    assert (row.state, row.attempts, row.last_error) == (State.SENT, 3, None)
    got = sink.requests("/hook")
    assert len(got) == 3
    assert len({r.headers["webhook-id"] for r in got}) == 1  # stable across retries
    log = (await hub.delivery(row.id)).attempts_log
    assert [a.status for a in log] == [AttemptStatus.RETRYABLE] * 2 + [AttemptStatus.DELIVERED]
    assert log[0].error == "HTTP 500: boom 1"
    assert log[0].worker_id == "test-dispatcher"


async def test_o2_always_500_fails_exhausted_after_exactly_three_requests(
    hub: tidings.Hub, sink: Sink
) -> None:
    sink.default("/hook", Answer(500, "still broken"))
    await webhook(hub, sink.url("/hook"), max_attempts=3, filter={"kinds": ["monitor.*"]})
    await webhook(hub, sink.url("/later"), name="later", filter={"kinds": ["later.*"]})
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="m:1")
        (row,) = await settled(hub, 1)
        # Nothing more is sent once it failed: a later event goes out, the failed one not.
        await hub.publish(kind="later.event", subject="m:2")
        await sink.await_for(1, "/later")
    assert (row.state, row.failure, row.attempts) == (State.FAILED, Failure.EXHAUSTED, 3)
    assert row.last_error == "HTTP 500: still broken"
    assert sink.count("/hook") == 3


async def test_o3_404_fails_permanent_after_one_request(hub: tidings.Hub, sink: Sink) -> None:
    sink.default("/hook", Answer(404, "no such hook"))
    await webhook(hub, sink.url("/hook"), max_attempts=5)
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="m:1")
        (row,) = await settled(hub, 1)
    assert (row.state, row.failure, row.attempts) == (State.FAILED, Failure.PERMANENT, 1)
    assert row.last_error == "HTTP 404: no such hook"
    assert sink.count("/hook") == 1


async def test_o4_429_with_retry_after_then_200_is_sent_with_one_attempt(
    hub: tidings.Hub, sink: Sink
) -> None:
    sink.script("/hook", Answer(429, "slow down", headers={"Retry-After": "1"}), Answer(200))
    await webhook(hub, sink.url("/hook"))
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="m:1")
        (row,) = await settled(hub, 1)
    assert (row.state, row.attempts) == (State.SENT, 1)
    first, second = sink.requests("/hook")
    assert second.at - first.at >= 0.95  # the provider's hint was honoured
    log = (await hub.delivery(row.id)).attempts_log
    assert [a.status for a in log] == [AttemptStatus.RATE_LIMITED, AttemptStatus.DELIVERED]


async def test_o2_receiver_hanging_past_timeout_is_retried(hub: tidings.Hub, sink: Sink) -> None:
    sink.script("/hook", Answer(200, delay_s=3.0), Answer(200))
    await webhook(hub, sink.url("/hook"), timeout_s=0.5)
    async with running(hub, lease_s=5.0):
        await hub.publish(kind="monitor.down", subject="m:1")
        (row,) = await settled(hub, 1)
    assert (row.state, row.attempts) == (State.SENT, 2)
    log = (await hub.delivery(row.id)).attempts_log
    assert log[0].status is AttemptStatus.RETRYABLE
    assert "timed out" in (log[0].error or "") or "no answer" in (log[0].error or "")


async def test_o3_410_fails_and_disables_the_channel(hub: tidings.Hub, sink: Sink) -> None:
    sink.default("/hook", Answer(410, "hook deleted"))
    ch = await webhook(hub, sink.url("/hook"))
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="m:1")
        (row,) = await settled(hub, 1)
    assert (row.state, row.failure) == (State.FAILED, Failure.PERMANENT)
    channel = await hub.channels.get(ch.id)
    assert not channel.enabled
    assert "hook deleted" in (channel.disabled_reason or "")


async def test_o5_deliveries_older_than_max_age_are_not_sent_late(
    hub: tidings.Hub, sink: Sink
) -> None:
    await webhook(hub, sink.url("/hook"), max_age_s=60)
    await hub.publish(kind="monitor.down", subject="m:1")
    async with hub.store.engine.begin() as conn:  # published two minutes ago
        two_minutes_ago = datetime.now(UTC) - timedelta(minutes=2)
        await conn.execute(update(deliveries).values(created_at=two_minutes_ago))
    async with running(hub):
        (row,) = await settled(hub, 1)
    assert (row.state, row.failure) == (State.FAILED, Failure.EXPIRED)
    assert sink.count() == 0


async def test_webhook_body_headers_and_signature(hub: tidings.Hub, sink: Sink) -> None:
    secret = signing.new_secret()
    await webhook(hub, sink.url("/hook"), config={"secret": secret, "headers": {"X-Team": "sec"}})
    async with running(hub):
        published = await hub.publish(
            kind="finding.created",
            subject="finding:8812",
            severity="high",
            title="SQLi",
            data={"cvss": 9.8},
            labels={"env": "prod"},
        )
        await settled(hub, 1)
    (got,) = sink.requests("/hook")
    body: dict[str, Any] = json.loads(got.body)
    assert body["type"] == "event"
    assert body["channel"] == "hook"
    assert body["delivery_id"] == published.deliveries[0].id
    assert body["event"]["subject"] == "finding:8812"
    assert body["event"]["data"] == {"cvss": 9.8}
    assert body["event"]["created_at"].endswith("Z")
    assert got.headers["x-team"] == "sec"
    assert got.headers["content-type"].startswith("application/json")
    timestamp = int(got.headers["webhook-timestamp"])
    assert signing.verify(secret, got.headers, got.body, now=timestamp)
    assert not signing.verify(secret, got.headers, got.body + b" ", now=timestamp)


SECRET = "CANARY-SECRET-7f3a9c-exploding"


class _Exploding(Adapter):
    """A buggy adapter whose exception quotes the channel's secret."""

    spec: ClassVar[KindSpec] = KindSpec(
        kind="exploding",
        description="An adapter with a bug.",
        fields=(ConfigField("token", FieldType.STRING, "A secret.", secret=True),),
        flavour="text",
    )

    def render(
        self,
        channel: Channel,
        target: Target,
        events: Sequence[Event],
        *,
        shorten_to: int | None = None,
        part: int = 1,
        parts: int = 1,
    ) -> Message:
        return Message(target=target, payload=b"x", size=1)

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        raise RuntimeError(f"adapter bug: kaboom with {channel.config.get('token')}")


class _Deaf(_Exploding):
    """Ignores its timeout: only the dispatcher's own guard can end its send."""

    spec: ClassVar[KindSpec] = KindSpec("deaf", "An adapter that never answers.", (), "text")

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        await asyncio.sleep(3600)
        raise AssertionError("not reached")


async def test_an_adapter_ignoring_its_timeout_is_cut_off_and_retried(
    hub: tidings.Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sending, "TIMEOUT_GRACE_S", 0.2)
    # A kind only this test's dispatcher knows: stored directly, past the Hub's kind check.
    await hub.store.create_channel(
        validate.channel_spec(
            name="x", kind="deaf", timeout_s=0.3, max_attempts=2, retry_backoff_s=0.05
        )
    )
    async with running(hub, extra_adapters=[_Deaf()], lease_s=5.0):
        await hub.publish(kind="a.b", subject="s")
        (row,) = await settled(hub, 1, timeout_s=20)
    assert (row.state, row.failure, row.attempts) == (State.FAILED, Failure.EXHAUSTED, 2)
    log = (await hub.delivery(row.id)).attempts_log
    assert [a.status for a in log] == [AttemptStatus.RETRYABLE, AttemptStatus.RETRYABLE]
    assert log[0].error == "no answer within 0.3 s"
    assert all(400 <= (a.duration_ms or 0) < 3000 for a in log)


async def test_unexpected_adapter_exception_is_a_scrubbed_retry_its_traceback_logged(
    hub: tidings.Hub, caplog: pytest.LogCaptureFixture
) -> None:
    await hub.store.create_channel(
        validate.channel_spec(
            name="x",
            kind="exploding",
            config={"token": SECRET},
            max_attempts=2,
            retry_backoff_s=0.05,
        )
    )
    with caplog.at_level(logging.WARNING, logger="tidings.channels"):
        async with running(hub, extra_adapters=[_Exploding()]):
            await hub.publish(kind="a.b", subject="s")
            (row,) = await settled(hub, 1)
    assert (row.state, row.failure, row.attempts) == (State.FAILED, Failure.EXHAUSTED, 2)
    log = (await hub.delivery(row.id)).attempts_log
    assert log[0].status is AttemptStatus.RETRYABLE
    assert log[0].error == "RuntimeError: adapter bug: kaboom with ••••ding"
    assert log[0].provider_response is None  # no traceback where API readers see it
    assert SECRET not in (row.last_error or "")
    logged = [r.getMessage() for r in caplog.records if r.name == "tidings.channels"]
    assert len(logged) == 2  # once per attempt
    assert all(m.startswith("channel 'x': unexpected error") for m in logged)
    assert all("Traceback" in m and SECRET not in m for m in logged)


async def test_inbox_channel_stores_the_message(hub: tidings.Hub) -> None:
    ch = await hub.channels.create(name="inbox", kind="inbox")
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="m:1", severity="high", title="web-1 down")
        (row,) = await settled(hub, 1)
    assert row.state is State.SENT
    (message,) = await hub.store.inbox_recent(ch.id)
    assert message.title == "web-1 down"
    assert "[HIGH] web-1 down — m:1" in message.body
    assert message.delivery_ids == [row.id]


async def test_c5_refuses_a_lease_shorter_than_four_timeouts(hub: tidings.Hub, sink: Sink) -> None:
    # Saved when the lease was longer: stored directly, as the Hub refuses it under 120 s.
    await hub.store.create_channel(
        validate.channel_spec(
            name="hook", kind="webhook", config={"url": sink.url("/hook")}, timeout_s=60
        )
    )
    config = DispatcherConfig(worker_id="w", lease_s=120.0)
    dispatcher = Dispatcher(hub.store, Registry(builtin_adapters()), config)
    with pytest.raises(ConfigError, match=r"lease of 120 s .*\(60 s on channel 'hook'\)"):
        await asyncio.wait_for(dispatcher.run(), 10)


async def test_w2_in_process_publish_wakes_an_idle_dispatcher(hub: tidings.Hub, sink: Sink) -> None:
    await webhook(hub, sink.url("/hook"))
    async with running(hub, poll_interval_s=10.0) as dispatcher:
        await asyncio.wait_for(dispatcher.idle.wait(), 5)  # asleep on a 10 s poll
        await hub.publish(kind="monitor.down", subject="m:1")
        # far sooner than the 10 s poll: the publish itself woke the dispatcher
        got = await sink.await_for(1, "/hook", timeout_s=2.0)
    assert len(got) == 1


async def test_w3_a_send_cut_by_the_grace_period_is_an_audited_attempt_not_unsent(
    hub: tidings.Hub, sink: Sink
) -> None:
    # Three sends reach a receiver that never answers; two more rows wait for a send slot.
    # The cut sends may have been taken: each keeps its attempt and gets its audit row (a
    # second copy later is then explained). The rows that never left are given back unsent.
    sink.default("/hook", Answer(200, hang=True))
    await webhook(hub, sink.url("/hook"))
    async with running(hub, grace_s=0.5, concurrency=3):
        await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(5)])
        await sink.await_for(3, "/hook")
    page = await hub.deliveries()
    assert {v.delivery.state for v in page.items} == {State.PENDING}  # none left sending
    reached = {int(json.loads(r.body)["delivery_id"]) for r in sink.requests("/hook")}
    assert len(reached) == 3
    for view in page.items:
        row = view.delivery
        log = (await hub.delivery(row.id)).attempts_log
        if row.id in reached:
            assert row.attempts == 1
            assert [(a.status, a.error) for a in log] == [
                (AttemptStatus.RETRYABLE, sending.INTERRUPTED_ERROR)
            ]
            assert row.last_error == sending.INTERRUPTED_ERROR
        else:
            assert (row.attempts, log) == (0, [])  # given back, attempt revoked
    # The worker's own shutdown says nothing about the receiver: no breaker count.
    assert await hub.store.breakers() == {}


async def test_w3_once_stopping_no_further_row_of_a_claim_is_sent(
    hub: tidings.Hub, sink: Sink
) -> None:
    # One slot, a slow answer: the claim's rows go one after another. Stopped during the
    # first send, the dispatcher lets it finish and starts no other, though the grace period
    # would leave time for all of them.
    sink.default("/hook", Answer(200, delay_s=0.3))
    await webhook(hub, sink.url("/hook"))
    async with running(hub, grace_s=20.0, concurrency=1) as dispatcher:
        await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(10)])
        await sink.await_for(1, "/hook")
        dispatcher.stop()
    rows = (await hub.deliveries()).items
    states = Counter(v.delivery.state for v in rows)
    assert states == {State.SENT: sink.count("/hook"), State.PENDING: 10 - sink.count("/hook")}
    assert sink.count("/hook") == 1
    assert {v.delivery.attempts for v in rows if v.delivery.state is State.PENDING} == {0}


async def test_eventually_helper_can_fail() -> None:
    async def never() -> bool:
        return False

    with pytest.raises(AssertionError):
        await eventually(never, timeout_s=0.2)


async def test_a_row_that_could_outlive_its_lease_waiting_is_given_back_not_sent_twice(
    hub: tidings.Hub, sink: Sink
) -> None:
    # One slot each and 0.4 s per answer: twenty rows need 8 s, twice the 4 s lease. Sent
    # regardless, the rows still queued when the lease ends would be leased and sent by
    # the other dispatcher as well. (The timeout keeps a margin over the answer's delay, so
    # a loaded machine does not turn a slow answer into a retry: a second copy for another
    # reason than the lease.)
    sink.default("/hook", Answer(200, delay_s=0.4))
    await webhook(hub, sink.url("/hook"), timeout_s=1.0)
    async with (
        running(hub, worker_id="a", concurrency=1, lease_s=4.0),
        running(hub, worker_id="b", concurrency=1, lease_s=4.0),
    ):
        await hub.publish_many([{"kind": "monitor.down", "subject": f"m:{i}"} for i in range(20)])
        rows = await settled(hub, 20, timeout_s=60)
    assert [r.state for r in rows] == [State.SENT] * 20
    assert sink.count("/hook") == 20  # none went out twice
    assert [r.attempts for r in rows] == [1] * 20  # a row given back had its attempt revoked
