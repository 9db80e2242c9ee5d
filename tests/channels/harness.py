"""What the channel tests share: building channels and events, sending one message through
an adapter, running a table of (emulator behaviour → expected outcome), and the checks every
outcome and config must pass — no secret in an outcome, secrets redacted in reads, every part
of a digest within the kind's limit. `test_conformance.py` runs them over every kind;
each vendor's own file adds only its deltas.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.http import HttpClient
from tidings.channels.netguard import Network, parse_networks
from tidings.core.model import Channel, Event, Severity
from tidings.core.outcome import Outcome
from tidings.core.redact import MASK, masked_config
from tidings.core.secret_edit import restore_secrets
from tidings.core.states import Mode

LOOPBACK = parse_networks("127.0.0.0/8")
CANARY = "CANARY-SECRET-7f3a9c"


@dataclass(frozen=True)
class Case:
    """Arrange the emulator (a callable), then expect an outcome type and, optionally, more."""

    name: str
    arrange: Callable[[], None]
    expected: type
    check: Callable[[Outcome], bool] = lambda _outcome: True


class _NoStore:
    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        self.changes = changes

    async def inbox_put(self, *args: object) -> None:  # pragma: no cover - not a chat kind
        raise AssertionError("a chat adapter must not write the inbox")


def channel(kind: str, config: dict[str, Any], **fields: Any) -> Channel:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": 1,
        "name": f"{kind}-test",
        "kind": kind,
        "config": config,
        "enabled": True,
        "mode": Mode.REALTIME,
        "digest_period_s": 60.0,
        "filter": {},
        "rate_per_min": 0.0,
        "rate_burst": 1,
        "max_attempts": 3,
        "retry_backoff_s": 1.0,
        "timeout_s": 2.0,
        "max_age_s": None,
        "tenant": None,
        "templates": {},
        "disabled_reason": None,
        "created_at": now,
        "updated_at": now,
    } | fields
    return Channel(**values)


def event(i: int = 1, **fields: Any) -> Event:
    values: dict[str, Any] = {
        "id": i,
        "kind": "finding.created",
        "subject": f"finding:{i}",
        "severity": Severity.HIGH,
        "title": f"SQL injection in /login #{i}",
        "body": "parameter `user` is injectable",
        "url": f"https://scanner.example/f/{i}",
        "labels": {"env": "prod"},
        "data": {"cvss": 9.8},
        "tenant": None,
        "idempotency_key": None,
        "created_at": datetime.now(UTC),
    } | fields
    return Event(**values)


async def send_one(
    adapter: Adapter,
    ch: Channel,
    message: Message | None = None,
    *,
    allowed: Sequence[Network] = LOOPBACK,
) -> Outcome:
    message = message or adapter.render(ch, Target((1,), message_id="msg_t1"), [event()])
    async with HttpClient(allowed_networks=allowed) as http:
        ctx = SendContext(http=http, store=_NoStore(), attempt_at=datetime.now(UTC))
        return await adapter.send(ctx, ch, message)


async def run_table(adapter: Adapter, ch: Channel, cases: Sequence[Case]) -> None:
    for case in cases:
        case.arrange()
        outcome = await send_one(adapter, ch)
        assert isinstance(outcome, case.expected), (case.name, outcome)
        assert case.check(outcome), (case.name, outcome)
        assert_no_secret(outcome, ch, adapter)


def assert_no_secret(outcome: Outcome, ch: Channel, adapter: Adapter) -> None:
    text = f"{getattr(outcome, 'error', '')} {getattr(outcome, 'provider_response', '')}"
    assert CANARY not in text, outcome
    for name in adapter.secret_fields:
        value = ch.config.get(name)
        if isinstance(value, str) and len(value) > 8:
            assert value not in text, (name, outcome)
    for secret in adapter.secrets_of(ch):
        assert secret not in text, (secret, outcome)


def assert_redacted(adapter: Adapter, config: dict[str, Any]) -> None:
    """Reads show every secret masked, and sending the read back keeps every stored value."""
    shown = masked_config(adapter.spec, config)
    for name in adapter.spec.sensitive_fields:
        if name in config:
            assert MASK in str(shown[name]), name
    assert CANARY not in str(shown)
    assert restore_secrets(adapter.spec, shown, config) == config


def assert_within_limit(adapter: Adapter, ch: Channel, events: Sequence[Event]) -> list[Message]:
    """A digest of `events` planned the way the dispatcher does: every part within the limit,
    every event in exactly one part, parts numbered."""
    from tidings.dispatch.sending import plan_digest

    ids = [e.id for e in events]
    entries = [(i, f"msg_e{i}") for i in ids]
    messages = plan_digest(adapter, ch, ids[0], entries, events)
    limit = adapter.size_limit(ch)
    assert limit is not None
    assert all(m.size <= limit for m in messages), [m.size for m in messages]
    covered = [i for m in messages for i in m.target.delivery_ids]
    assert covered == ids
    return messages


async def hangs_past_timeout(adapter: Adapter, ch: Channel) -> Outcome:
    """The emulator must be arranged to hang; the outcome must be a retry within ~timeout."""
    started = asyncio.get_running_loop().time()
    outcome = await send_one(adapter, ch)
    assert asyncio.get_running_loop().time() - started < ch.timeout_s + 3
    return outcome
