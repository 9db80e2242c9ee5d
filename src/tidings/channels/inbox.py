"""The `inbox` kind: messages stored locally and shown in the admin UI — the zero-setup
target for a first publish, and a preview of what a channel would send."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tidings.channels.base import Adapter, Limits, Message, SendContext, Target
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome
from tidings.core.text import truncate_chars


def event_line(event: Event) -> str:
    title = event.title or event.kind
    return f"[{event.severity.value.upper()}] {title} — {event.subject}"


def event_text(event: Event) -> str:
    lines = [event_line(event)]
    if event.body:
        lines.append(event.body)
    if event.url:
        lines.append(event.url)
    return "\n".join(lines)


class InboxAdapter(Adapter):
    kind: ClassVar[str] = "inbox"
    limits: ClassVar[Limits] = Limits(max_message_size=65_536, size_unit="chars")
    spec: ClassVar[KindSpec] = KindSpec(
        kind="inbox",
        description="Stored here and shown in the admin UI's inbox",
        fields=(),
        flavour="text",
        max_text_chars=65_536,
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
        if target.batch_id is None:
            title = events[0].title or events[0].kind
            text = event_text(events[0])
        else:
            title = f"{len(events)} events" + (f" (part {part}/{parts})" if parts > 1 else "")
            text = "\n".join(event_line(e) for e in events)
        if shorten_to is not None:
            text = truncate_chars(text, shorten_to)
        return Message(
            target=target,
            payload=text.encode(),
            size=len(text),
            content_type="text/plain; charset=utf-8",
            title=title,
            text=text,
        )

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        await ctx.store.inbox_put(
            channel.id,
            message.target.message_id,
            message.target.batch_id,
            message.target.delivery_ids,
            message.title,
            message.text,
        )
        return Delivered(provider_response="stored in the inbox")
