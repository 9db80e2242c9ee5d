"""The fan-out's index answers exactly what asking every channel in turn answers (E1)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from tidings.core.fanout import Fanout, initial_state
from tidings.core.filters import channel_takes
from tidings.core.model import Channel, EventInput, Severity
from tidings.core.states import Mode, SkipReason, State

AT = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = ["a", "a.b", "a.b.c", "ab", "b.a", "x[1]", "x?", "", "a*", "a.b.x"]
PATTERNS = ["a", "a.*", "a.b*", "*", "*.c", "?.b", "a?b", "a.b.c", "b.*", "[ab]*", "x[[]1]"]
PATTERNS += ["x\\?", "a[.]b*", "a.b.?"]
TENANTS = [None, None, "acme", "globex"]


def channel(n: int, filter: dict[str, Any], tenant: str | None, enabled: bool = True) -> Channel:
    return Channel(
        id=n,
        name=f"c{n}",
        kind="webhook",
        config={},
        enabled=enabled,
        mode=Mode.REALTIME,
        digest_period_s=0,
        filter=filter,
        rate_per_min=0,
        rate_burst=1,
        max_attempts=3,
        retry_backoff_s=1,
        timeout_s=5,
        max_age_s=None,
        tenant=tenant,
        templates={},
        disabled_reason=None,
        created_at=AT,
        updated_at=AT,
    )


def event(kind: str, tenant: str | None, severity: Severity, labels: dict[str, str]) -> EventInput:
    return EventInput(kind=kind, subject="s", severity=severity, labels=labels, tenant=tenant)


def asked_in_turn(channels: list[Channel], e: EventInput) -> list[Channel]:
    return [c for c in channels if channel_takes(c, e)]


def random_filter(rand: random.Random) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if rand.random() < 0.7:
        found["kinds"] = rand.sample(PATTERNS, rand.randint(1, 3))
    if rand.random() < 0.2:
        found["min_severity"] = rand.choice(list(Severity)).value
    if rand.random() < 0.2:
        found["labels"] = {"env": rand.choice(["prod", "dev"])}
    return found


@pytest.mark.parametrize("seed", range(20))
def test_e1_the_index_answers_as_asking_every_channel_in_turn(seed: int) -> None:
    rand = random.Random(seed)
    channels = [
        channel(n, random_filter(rand), rand.choice(TENANTS), rand.random() < 0.9)
        for n in rand.sample(range(1, 1000), rand.randint(0, 60))
    ]
    fanout = Fanout(channels)
    for kind in KINDS:
        for tenant in TENANTS[1:]:
            for labels in ({}, {"env": "prod"}):
                e = event(kind, tenant, rand.choice(list(Severity)), labels)
                assert fanout.channels_for(e) == asked_in_turn(channels, e), (kind, tenant)


def test_e1_a_tenants_event_is_asked_of_its_own_tenant_and_the_shared_channels() -> None:
    channels = [
        channel(1, {}, None),
        channel(2, {}, "acme"),
        channel(3, {"kinds": ["deploy.*"]}, None),
        channel(4, {}, "globex"),
        channel(5, {"kinds": ["*.failed"]}, "acme"),
        channel(6, {}, None),
    ]
    fanout = Fanout(channels)
    assert [
        c.id for c in fanout.channels_for(event("deploy.failed", "acme", Severity.HIGH, {}))
    ] == [
        1,
        2,
        3,
        5,
        6,
    ]
    assert [c.id for c in fanout.channels_for(event("scan.done", None, Severity.HIGH, {}))] == [
        1,
        6,
    ]
    assert [c.id for c in fanout.channels_for(event("deploy", "globex", Severity.HIGH, {}))] == [
        1,
        4,
        6,
    ]


def test_e1_deliveries_to_a_disabled_channel_start_skipped() -> None:
    assert initial_state(channel(1, {}, None)) == (State.PENDING, None)
    assert initial_state(channel(1, {}, None, enabled=False)) == (
        State.SKIPPED,
        SkipReason.CHANNEL_DISABLED,
    )
