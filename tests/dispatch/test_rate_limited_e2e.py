"""C6 end to end: a rate-limited channel whose receiver answers slowly still sends at its
rate. Its claims take what the bucket refilled, a burst at most; waiting for one claim's
sends to end before the next claim would cap the rate at burst ÷ send time."""

from __future__ import annotations

import tidings
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Answer, Sink
from tidings.core.states import State

SLOW_S = 1.0


async def test_c6_claims_overlap_the_slow_sends_of_a_rate_limited_channel(
    hub: tidings.Hub, sink: Sink
) -> None:
    # 600/min refills a burst of 3 every 0.3 s; each answer takes 1 s. One claim at a time,
    # at most 3 requests would ever be on their way at once.
    sink.default("/hook", Answer(200, delay_s=SLOW_S))
    await webhook(hub, sink.url("/hook"), rate_per_min=600, rate_burst=3, timeout_s=3.0)
    await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(24)])
    async with running(hub, concurrency=16):
        rows = await settled(hub, 24, timeout_s=60)
    assert [r.state for r in rows] == [State.SENT] * 24
    assert [r.attempts for r in rows] == [1] * 24
    arrivals = sorted(r.at for r in sink.requests("/hook"))
    assert len(arrivals) == 24
    # Requests on their way at once: those that arrived within one answer's time of another.
    overlapping = max(sum(1 for b in arrivals if a <= b < a + SLOW_S * 0.9) for a in arrivals)
    assert overlapping > 3, arrivals
