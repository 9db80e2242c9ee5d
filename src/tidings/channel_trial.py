"""A channel tried without a delivery: a test message sent now through the real adapter, and
a delivery's message rendered again for the admin UI.

Service level: imports tidings.dispatch's sending, the channel adapters' types and
tidings.core.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

from tidings.channels.base import Adapter, ChannelStore, SendContext, Target
from tidings.channels.http import HttpClient
from tidings.channels.netguard import Network
from tidings.core import message_id
from tidings.core.model import Channel, Delivery, Event, Severity
from tidings.core.outcome import Outcome
from tidings.dispatch.sending import render_single, send


def trial_event(channel: Channel, now: datetime) -> Event:
    return Event(
        id=0,
        kind="tidings.test",
        subject=f"channel:{channel.name}",
        severity=Severity.INFO,
        title=f"Test message from tidings to {channel.name}",
        body="If you can read this, the channel works.",
        url=None,
        labels={},
        data={},
        tenant=None,
        idempotency_key=None,
        created_at=now,
    )


async def send_test(
    adapter: Adapter, channel: Channel, store: ChannelStore, allowed: Sequence[Network]
) -> Outcome:
    """Render and send a test message now; the classified outcome, nothing stored. Each test
    message has an id of its own (N1): a receiver that drops repeated ids keeps every one."""
    now = datetime.now(UTC)
    fresh = message_id.from_random(secrets.token_bytes(message_id.RANDOM_BYTES))
    target = Target((0,), message_id=fresh)
    message = render_single(adapter, channel, target, trial_event(channel, now))
    async with HttpClient(allowed_networks=allowed) as http:
        ctx = SendContext(http=http, store=store, attempt_at=now)
        result = await send(adapter, ctx, channel, message, lambda: datetime.now(UTC))
    return result.outcome


def preview_text(adapter: Adapter, channel: Channel, delivery: Delivery, event: Event) -> str:
    """The message as the adapter renders `event` now (templates may have changed since it
    was sent); a render problem is shown, not raised."""
    target = Target((delivery.id,), message_id=delivery.message_id)
    try:
        message = adapter.render(channel, target, [event])
    except Exception as error:  # a plugin's or a template's bug: shown on the page
        return f"(this message cannot be rendered now: {error})"
    if message.text:
        return message.text
    text = message.payload.decode(errors="replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
