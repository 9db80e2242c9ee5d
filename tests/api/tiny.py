"""A small channel kind that declares one config field of every type, for the tests of what
is generated from a declaration (checks, the kinds route, the admin UI's form), and a kind
that declares nothing. Neither is ever sent through a dispatcher."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.inbox import InboxAdapter
from tidings.channels.registry import Registry
from tidings.core.kinds import ConfigField, FieldType, KindSpec, check_config
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome

TOKEN = "tiny-token-0123456789abcdef"


class TinyAdapter(Adapter):
    kind: ClassVar[str] = "tiny"
    spec: ClassVar[KindSpec] = KindSpec(
        kind="tiny",
        description="A kind made for tests",
        fields=(
            ConfigField("url", FieldType.URL, "Where it goes", required=True, label="URL"),
            ConfigField("token", FieldType.STRING, "The receiver's token", secret=True),
            ConfigField("retries", FieldType.INTEGER, "Extra tries", minimum=0, maximum=5),
            ConfigField("loud", FieldType.BOOLEAN, "Shout it", default=False),
            ConfigField(
                "tone", FieldType.CHOICE, "Its tone", default="low", choices=("low", "high")
            ),
            ConfigField("to", FieldType.STRING_LIST, "Who gets it"),
            ConfigField("headers", FieldType.STRING_MAP, "Extra headers"),
        ),
        flavour="text",
        default_rate_per_min=7.0,
        max_text_chars=500,
    )

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return check_config(self.spec, config)

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
        text = "\n".join(e.title for e in events)
        return Message(target, text.encode(), len(text), "text/plain", text=text)

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        return Delivered()


class BareAdapter(Adapter):
    """A plugin kind that declares nothing: its config is whatever JSON object it is given."""

    kind: ClassVar[str] = "bare"

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return dict(config)  # nothing declared, nothing to check against

    render = TinyAdapter.render
    send = TinyAdapter.send


def tiny_registry() -> Registry:
    return Registry([TinyAdapter(), BareAdapter(), InboxAdapter()])
