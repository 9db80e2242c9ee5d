"""The dispatcher reads time from its injected clock: a decision that depends on time passing
is tested by moving the clock, not by sleeping."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

import tidings
from tests.dispatch.helpers import running, settled
from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.core import validate
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome
from tidings.core.states import AttemptStatus, State
from tidings.metrics import Metrics

LEASE_S = 60.0


class ManualClock:
    """Real wall time (the database compares it), a monotonic time moved by hand."""

    def __init__(self) -> None:
        self.at = 1000.0

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return self.at


class _Slow(Adapter):
    """Each send "takes" a whole lease: it moves the dispatcher's clock past it."""

    spec: ClassVar[KindSpec] = KindSpec("slow", "Each send takes a whole lease.", (), "text")
    clock: ClassVar[ManualClock]
    sent: ClassVar[list[int]] = []

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
        self.sent.extend(message.target.delivery_ids)
        self.clock.at += LEASE_S
        return Delivered()


async def test_rows_that_could_no_longer_be_sent_within_the_lease_are_given_back(
    hub: tidings.Hub,
) -> None:
    """C1: after one send used up the lease, the claim's other rows go back unsent (attempt
    revoked) and are sent by later claims, one each: six rows leased for three sends."""
    clock = ManualClock()
    _Slow.clock = clock
    _Slow.sent = []
    # A kind of the test's own: stored directly, as the Hub knows only installed kinds.
    await hub.store.create_channel(validate.channel_spec(name="slow", kind="slow", timeout_s=1.0))
    metrics = Metrics(hub.store)
    extra = [_Slow()]
    async with running(
        hub, extra_adapters=extra, lease_s=LEASE_S, concurrency=1, clock=clock, metrics=metrics
    ):
        await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(3)])
        rows = await settled(hub, 3)
    assert [r.state for r in rows] == [State.SENT] * 3
    assert [r.attempts for r in rows] == [1, 1, 1]  # given back with the attempt revoked
    assert sorted(_Slow.sent) == [r.id for r in rows]  # each sent once
    scrape = (await metrics.render()).decode()
    assert 'tidings_claimed_deliveries_total{mode="realtime"} 6.0' in scrape
    for row in rows:
        log = (await hub.delivery(row.id)).attempts_log
        assert [a.status for a in log] == [AttemptStatus.DELIVERED]
