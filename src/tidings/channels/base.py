"""What every channel adapter is: a kind declared once as data (`spec`), rendering to a sized
message, and `send`.

An adapter never returns a bool and never lets an exception escape on purpose: `send` answers
with a `tidings.core.outcome` value. The dispatcher guarantees that a message handed to
`send` already fits the adapter's limit (it segments digests and shortens single events).
Imports tidings.channels (http, failure) and tidings.core.
"""

from __future__ import annotations

import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from tidings.channels.failure import outcome_for_exception, scrub_secrets, unexpected_failure
from tidings.channels.http import HttpClient
from tidings.core import kinds
from tidings.core.kinds import FieldType, KindSpec
from tidings.core.message_id import for_digest
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome
from tidings.core.redact import MIN_SECRET_CHARS, secret_values

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Target:
    """What one message is about: one delivery (realtime) or part of a batch (digest)."""

    delivery_ids: tuple[int, ...]
    batch_id: int | None = None
    #: What the receiver sees as the message's id (`webhook-id`, Message-ID): stored with the
    #: delivery, unique across databases and the same on every retry (N1). A digest part's
    #: is derived from its entries' (`Target.digest`).
    message_id: str = field(kw_only=True)

    @classmethod
    def digest(cls, batch_id: int, entries: Sequence[tuple[int, str]]) -> Target:
        """A digest part: its entries as (delivery id, stored message id), oldest first. A
        retry of the same entries keeps the id; another cut of them gets another."""
        return cls(
            tuple(delivery_id for delivery_id, _ in entries),
            batch_id,
            message_id=for_digest([key for _, key in entries]),
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A rendered message, ready to send."""

    target: Target
    payload: bytes
    #: Measured in the unit of the kind's declared limit (`spec.limit`), compared with it.
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
    #: The W3C traceparent of the send's span, for kinds that pass it on (webhooks).
    traceparent: str | None = None


class _FromSpec(Generic[T]):
    """A read of the adapter class's `spec`, on the class and on its instances alike."""

    def __init__(self, read: Callable[[KindSpec], T]) -> None:
        self._read = read

    def __get__(self, instance: object, owner: type[Adapter]) -> T:
        return self._read(owner.spec)


class Adapter(ABC):
    #: The kind, declared once: config fields, size limit (its unit in its name), flavour,
    #: default rate. API, UI, CLI and config validation are generated from it.
    spec: ClassVar[KindSpec]
    kind = _FromSpec(lambda spec: spec.kind)
    #: Config keys holding secrets: never shown in reads, logs or errors.
    secret_fields = _FromSpec(lambda spec: spec.secret_fields)
    #: A promise that a send is one `HttpClient.post`, whose own timeout ends it at
    #: `timeout_s`: the dispatcher then sets no timer of its own (a timer per send is a
    #: measurable share of a send), and a claim may start sends until the lease's end minus
    #: `timeout_s` rather than minus the guard's grace too. The channel conformance suite
    #: holds every kind that makes it to it.
    bounded_by_http_timeout: ClassVar[bool] = False

    # -- configuration --------------------------------------------------------------------

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check a channel's config when it is saved: first against the declaration (unknown
        keys, missing fields, wrong types), then the kind's own rules. Raises
        ValidationError naming `config.<field>`; returns the config as it is stored."""
        return self.check_config(kinds.check_config(self.spec, config))

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """The kind's own rules on a config already of the declared shape (a key in a URL,
        a secret's format) and its normalisations; the default has none."""
        return config

    def destinations(self, config: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(config field, host) of what a send connects to, as the address guard checks it:
        by default the host of every URL field."""
        found = []
        for field_ in self.spec.fields:
            value = config.get(field_.name)
            if field_.type is FieldType.URL and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    host = urlsplit(value).hostname
                    if host:
                        found.append((field_.name, host))
        return found

    def size_limit(self, channel: Channel) -> int | None:
        """The limit for this channel, in the declared unit (some kinds let the config lower
        or raise it)."""
        return self._declared_limit

    @functools.cached_property
    def _declared_limit(self) -> int | None:
        # Read on every render and send: the spec's limit is looked up once.
        limit = self.spec.limit
        return None if limit is None else limit.amount

    # -- secrets and failures --------------------------------------------------------------

    def secrets_of(self, channel: Channel) -> list[str]:
        """Every string of this channel's config that must never reach a text: the declared
        secret fields with the key-carrying parts of keyed URLs, the credentials of URLs and
        the values of maps declared with secret parts. Longest first."""
        return secret_values(self.spec, channel.config)

    def scrubbed(self, outcome: Outcome, channel: Channel) -> Outcome:
        """`outcome` with every secret of the channel masked in its error and provider
        response. Most answers are too short to hold one: those skip the lookup."""
        texts = (getattr(outcome, "error", None), outcome.provider_response)
        if all(text is None or len(text) < MIN_SECRET_CHARS for text in texts):
            return outcome
        return scrub_secrets(outcome, self.secrets_of(channel))

    def translate(self, error: Exception, channel: Channel) -> Outcome | None:
        """The outcome of an exception raised while sending, when it is a known failure of
        the send (timeouts, refused connections, blocked addresses); None otherwise."""
        return outcome_for_exception(error)

    def failure(self, error: Exception, channel: Channel) -> Outcome:
        """The adapter's catch-all: a known failure as its outcome, anything else as a retry
        whose scrubbed traceback goes to the log, never to the attempt row."""
        known = self.translate(error, channel)
        if known is not None:
            return known
        return unexpected_failure(error, channel=channel.name, secrets=self.secrets_of(channel))

    # -- rendering and sending --------------------------------------------------------------

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
