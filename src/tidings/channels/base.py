"""What every channel adapter is: declared limits, rendering to a sized message, and `send`.

An adapter never returns a bool and never lets an exception escape on purpose: `send` answers
with a `tidings.core.outcome` value. The dispatcher guarantees that a message handed to
`send` already fits the adapter's limit (it segments digests and shortens single events).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from tidings.channels.http import HttpClient
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome


@dataclass(frozen=True, slots=True)
class Limits:
    """A kind's declared limits, with units in the names."""

    #: The most a message may measure, in `size_unit` (None: no limit).
    max_message_size: int | None
    #: "bytes" (UTF-8) or "chars" (code points): what `Message.size` counts.
    size_unit: str = "bytes"
    #: The kind's default `rate_per_min` for new channels (0: unlimited).
    default_rate_per_min: float = 0.0
    #: The markup the kind renders: "json", "markdown", "text", …
    flavour: str = "text"


@dataclass(frozen=True, slots=True)
class Target:
    """What one message is about: one delivery (realtime) or part of a batch (digest)."""

    delivery_ids: tuple[int, ...]
    batch_id: int | None = None

    @property
    def message_id(self) -> str:
        """Stable across retries of the same message, so a receiver can drop duplicates.

        A realtime message is its delivery; a digest message is its batch and the exact set of
        entries in it (a retry renders the same entries, so it keeps its id).
        """
        if self.batch_id is None:
            return f"msg_d{self.delivery_ids[0]}"
        digest = hashlib.sha256(",".join(map(str, self.delivery_ids)).encode()).hexdigest()
        return f"msg_b{self.batch_id}_{digest[:12]}"


@dataclass(frozen=True, slots=True)
class Message:
    """A rendered message, ready to send."""

    target: Target
    payload: bytes
    #: Measured in the adapter's `size_unit`, compared with its limit.
    size: int
    content_type: str = "application/json"
    title: str = ""
    #: A human-readable rendering (the inbox shows it).
    text: str = ""


class ChannelStore(Protocol):
    """The little a send may write besides its outcome."""

    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        """Persist a change the provider asked for (e.g. Telegram's migrate_to_chat_id)."""
        ...

    async def inbox_put(
        self,
        channel_id: int,
        message_id: str,
        batch_id: int | None,
        delivery_ids: Sequence[int],
        title: str,
        body: str,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class SendContext:
    """What a send may use: the dispatcher's one HTTP client, the store's inbox and channel
    config, the attempt's time."""

    http: HttpClient
    store: ChannelStore
    attempt_at: datetime


class Adapter(ABC):
    kind: ClassVar[str]
    limits: ClassVar[Limits]
    #: The kind's declaration: config fields, size limit, flavour, default rate.
    spec: ClassVar[KindSpec]
    #: Config keys holding secrets: never shown in reads, logs or errors.
    secret_fields: ClassVar[tuple[str, ...]] = ()
    #: True when a send is a single `HttpClient.post`, whose total timeout already bounds
    #: it: the dispatcher then sets no timer of its own (one per send costs ~5 µs).
    bounded_by_http_timeout: ClassVar[bool] = False

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check a channel's config when it is saved; raise ValidationError naming the key."""
        return dict(config)

    def size_limit(self, channel: Channel) -> int | None:
        """The limit for this channel (some kinds let the config lower or raise it)."""
        return self.limits.max_message_size

    @abstractmethod
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
        """Render one message; with `shorten_to`, a single event cut to fit that size with a
        visible marker (keeping the start, the title first). A digest sent as several
        messages numbers them: this is message `part` of `parts`."""

    @abstractmethod
    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        """Send and classify the answer."""
