"""WeCom end to end through a real dispatcher, on both backends: a big digest split within the
robot's 4096-byte markdown limit, and a realtime burst held under its 20/min rate limit.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator

import pytest

import tidings
from tests.dispatch.helpers import running, settled
from tests.emulators.wecom import WecomEmulator
from tidings.channels.wecom import DEFAULT_RATE_PER_MIN
from tidings.core.states import State

KEY = "e2e-wecom-key-0001"
SUBJECT = re.compile(r"· (finding:\d{4})$", re.MULTILINE)
#: The emulator runs the vendor's window 20 times faster (20 per 3 s instead of 20 per 60 s)
#: and the channel runs the kind's default rate 20 times faster too (18/min → 360/min), so
#: the ratio under test — our default is 90 % of the vendor's limit — is the real one.
SPEEDUP = 20
VENDOR_LIMIT = 20
VENDOR_WINDOW_S = 60.0


def finding(i: int) -> dict[str, object]:
    body = (
        f"参数 `user` 存在注入 (parameter user is injectable) — 修复建议: 使用参数化查询. #{i} " * 4
    )
    return {
        "kind": "finding.created",
        "subject": f"finding:{i:04d}",
        "severity": "high" if i % 3 else "medium",
        "title": f"SQL 注入漏洞 in /api/登录 [{i}]",
        "body": body,
        "url": f"https://scanner.example/f/{i}",
    }


@pytest.fixture
def robot() -> Iterator[WecomEmulator]:
    with WecomEmulator(keys=[KEY]) as emu:
        assert isinstance(emu, WecomEmulator)
        yield emu


async def test_a_digest_of_200_is_split_within_the_limit_and_sent_once(
    hub: tidings.Hub, robot: WecomEmulator
) -> None:
    await hub.channels.create(
        name="sec-wecom-digest",
        kind="wecom",
        config={"webhook_url": robot.webhook_url(KEY)},
        mode="digest",
        digest_period_s=0.5,
        rate_per_min=600,
        timeout_s=2,
        retry_backoff_s=0.05,
    )
    published = await hub.publish_many([finding(i) for i in range(200)])
    assert all(len(str(p.event.body).encode()) > 300 for p in published)
    async with running(hub):
        rows = await settled(hub, 200, timeout_s=30)

    contents = robot.contents()
    assert len(contents) > 1  # the digest had to be split
    assert all(len(c.encode()) <= 4096 for c in contents), [len(c.encode()) for c in contents]
    seen = Counter(s for c in contents for s in SUBJECT.findall(c))
    assert seen == Counter(f"finding:{i:04d}" for i in range(200))  # each exactly once
    assert 40058 not in robot.codes()
    assert 45009 not in robot.codes()  # the vendor's 20/min held: few messages, not 200
    assert set(robot.codes()) == {0}
    assert len(rows) == 200
    assert {r.state for r in rows} == {State.SENT}


async def test_a_realtime_burst_at_the_default_rate_never_hits_the_robots_limit(
    hub: tidings.Hub,
) -> None:
    window_s = VENDOR_WINDOW_S / SPEEDUP
    with WecomEmulator(keys=[KEY], limit=VENDOR_LIMIT, window_s=window_s) as robot:
        assert isinstance(robot, WecomEmulator)
        await hub.channels.create(
            name="sec-wecom",
            kind="wecom",
            config={"webhook_url": robot.webhook_url(KEY)},
            rate_per_min=DEFAULT_RATE_PER_MIN * SPEEDUP,
            rate_burst=1,
            timeout_s=2,
            retry_backoff_s=0.05,
        )
        await hub.publish_many([finding(i) for i in range(50)])
        started = time.monotonic()
        async with running(hub, poll_interval_s=0.05):
            rows = await settled(hub, 50, timeout_s=25)
        elapsed = time.monotonic() - started

    assert robot.codes() == [0] * 50  # never 45009, and nothing sent twice
    assert {(r.state, r.attempts) for r in rows} == {(State.SENT, 1)}  # no attempt spent
    arrivals = [r.at for r in robot.requests()]
    busiest = max(sum(1 for t in arrivals if a <= t < a + window_s) for a in arrivals)
    assert busiest <= VENDOR_LIMIT
    # The rate, not luck, kept it under: 50 sends at 6/s with a burst of 1 take ≥ 49/6 s.
    assert elapsed >= 49 * 60 / (DEFAULT_RATE_PER_MIN * SPEEDUP) * 0.9
