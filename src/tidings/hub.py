"""`tidings.Hub`: the library's entry point (async), and `SyncHub`, its facade for sync code.

    hub = tidings.Hub("sqlite:///tidings.db")
    await hub.migrate()
    await hub.channels.create(name="ops", kind="inbox")
    await hub.publish(kind="monitor.down", subject="monitor:7", severity="high", title="…")

`publish(..., conn=...)` runs inside the caller's own SQLAlchemy connection and transaction,
so the event commits or rolls back with the caller's business change (E1).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tidings import tracing
from tidings.channel_rules import DEFAULT_LEASE_S, ChannelRules
from tidings.core import validate
from tidings.core.errors import NotFound, ValidationError
from tidings.core.model import (
    Channel,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    EventInput,
    Page,
    PublishResult,
    ResendResult,
)
from tidings.store import Store
from tidings.store.clock import AppClock, utc_now
from tidings.store.notify import LocalNotifier

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from tidings.channels.registry import Registry

EventLike = EventInput | Mapping[str, Any]


def as_input(item: EventLike) -> EventInput:
    return item if isinstance(item, EventInput) else validate.event_input(**item)


#: F1: how many fallbacks a chain may hold (a channel, its fallback, and theirs).
MAX_FALLBACK_CHAIN = 3


class Channels:
    """Channel management: `hub.channels.create(...)`, `.update`, `.enable`, `.disable`, …

    Create and update check everything a channel must satisfy (`ChannelRules`): the same
    check whether the library, the API, the admin UI or the CLI asks."""

    def __init__(self, store: Store, rules: ChannelRules) -> None:
        self._store = store
        self.rules = rules

    async def create(self, **fields: Any) -> Channel:
        """A new channel; `rate_per_min` defaults to the kind's own (e.g. 18 for wecom)."""
        spec = self.rules.new(fields)
        await self._check_fallback(spec.fallback_channel_id, None)
        return await self._store.create_channel(spec)

    async def ensure(self, **fields: Any) -> Channel:
        """The channel named `name`, created or updated to match `fields` (the same fields
        as `create`; those not given take their defaults, `enabled` stays as it is unless
        given). Unchanged, nothing is written: a program may call this on every start."""
        current = await self.find(fields.get("name"))
        spec = self.rules.desired(fields, current)
        if current is None:
            return await self._store.create_channel(spec)
        if spec == current.spec():
            return current
        return await self._store.update_channel(current.id, spec)

    async def find(self, name: object) -> Channel | None:
        """The channel of that name; None when there is none."""
        if not isinstance(name, str):
            raise ValidationError("name", "is required")
        try:
            return await self._store.get_channel_by_name(name)
        except NotFound:
            return None

    async def get(self, channel_id: int) -> Channel:
        return await self._store.get_channel(channel_id)

    async def get_by_name(self, name: str) -> Channel:
        return await self._store.get_channel_by_name(name)

    async def list(self) -> list[Channel]:
        return await self._store.list_channels()

    async def update(self, channel_id: int, **changes: Any) -> Channel:
        """Change some fields; a secret given as its mask (`••••1234`) keeps the stored one."""
        current = await self._store.get_channel(channel_id)
        spec = self.rules.update(current, changes)
        if spec.fallback_channel_id != current.fallback_channel_id:
            await self._check_fallback(spec.fallback_channel_id, channel_id)
        return await self._store.update_channel(channel_id, spec)

    async def _check_fallback(self, fallback_id: int | None, own_id: int | None) -> None:
        """F1: the fallback exists, and with it no chain of fallbacks has a cycle or more
        than MAX_FALLBACK_CHAIN links (every channel's chain, this one's included)."""
        if fallback_id is None:
            return
        field = "fallback_channel_id"
        if fallback_id == own_id:
            raise ValidationError(field, "a channel cannot be its own fallback")
        links = {c.id: c.fallback_channel_id for c in await self._store.list_channels()}
        if fallback_id not in links:
            raise ValidationError(field, f"no channel with id {fallback_id}")
        links[own_id if own_id is not None else 0] = fallback_id
        for start in links:
            chain, at = [], links.get(start)
            while at is not None:
                if at == start or at in chain:
                    raise ValidationError(field, "the fallbacks would form a cycle")
                chain.append(at)
                at = links.get(at)
            if len(chain) > MAX_FALLBACK_CHAIN:
                raise ValidationError(
                    field, f"a chain of fallbacks may be at most {MAX_FALLBACK_CHAIN} long"
                )

    async def enable(self, channel_id: int) -> Channel:
        return await self._store.enable_channel(channel_id)

    async def disable(self, channel_id: int, reason: str | None = None) -> int:
        return await self._store.disable_channel(channel_id, reason)

    async def delete(self, channel_id: int) -> None:
        await self._store.delete_channel(channel_id)


class Hub:
    """The library's entry point over one database.

    `registry` holds the channel kinds (the built-ins and installed plugins by default);
    `lease_s` is the dispatchers' lease, which a channel's `timeout_s` must fit (C5);
    `secret_keys` (base64, the first encrypts) keep the channels' secrets, instead of
    TIDINGS_SECRET_KEY or the key file (S4).
    """

    def __init__(
        self,
        url: str,
        *,
        clock: AppClock = utc_now,
        registry: Registry | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        secret_keys: Sequence[str] | None = None,
    ) -> None:
        rules = ChannelRules(registry, lease_s)
        #: In-process wake-ups: a dispatcher of this process subscribes (W2).
        self.notifier = LocalNotifier()
        self.store = Store(
            url,
            clock=clock,
            on_work=self.notifier.announce,
            secret_keys=secret_keys,
            sensitive=rules.sensitive_fields,
        )
        self.channels = Channels(self.store, rules)

    @property
    def registry(self) -> Registry:
        return self.channels.rules.registry

    @property
    def lease_s(self) -> float:
        return self.channels.rules.lease_s

    async def __aenter__(self) -> Hub:
        # Connected and ready for a first publish as fast as the next (`Store.warm`), with
        # OpenTelemetry (when installed) imported now rather than on that publish's path.
        await self.store.warm(publish=True)
        tracing.active()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.store.close()

    async def migrate(self) -> None:
        await self.store.migrate()

    async def publish(self, *, conn: AsyncConnection | None = None, **fields: Any) -> PublishResult:
        """Publish one event (E1–E3); fields as in `tidings.core.validate.event_input`.

        Without `conn`, events published at the same moment by this process's tasks share
        one transaction (group commit): fewer commits, and each call still returns only once
        its own event is stored; an event the database refuses fails its own call only."""
        item = validate.event_input(**fields)
        if conn is None and not tracing.active():
            return await self.store.publish_one(item)
        (result,) = await self.publish_many([item], conn=conn)
        return result

    async def publish_many(
        self, items: Sequence[EventLike], *, conn: AsyncConnection | None = None
    ) -> list[PublishResult]:
        """Publish several events in one transaction: all are stored or none is."""
        inputs = [as_input(item) for item in items]
        if tracing.active():
            return await self._publish_traced(inputs, conn)
        if conn is None:
            return await self.store.publish(inputs)
        return await conn.run_sync(self.store.publish_in, inputs)

    async def _publish_traced(
        self, inputs: list[EventInput], conn: AsyncConnection | None
    ) -> list[PublishResult]:
        """As a span — a child of the first event's traceparent, or of the caller's
        context — whose traceparent each event keeps, so its sends join the trace."""
        parent = next((i.traceparent for i in inputs if i.traceparent), None)
        attributes = {"tidings.events": len(inputs)}
        with tracing.span("tidings.publish", parent=parent, attributes=attributes) as here:
            inputs = [replace(i, traceparent=here) for i in inputs]
            if conn is None:
                return await self.store.publish(inputs)
            return await conn.run_sync(self.store.publish_in, inputs)

    async def get_event(self, event_id: int) -> PublishResult:
        return await self.store.get_event(event_id)

    async def deliveries(
        self,
        query: DeliveryQuery | None = None,
        *,
        page: int | None = None,
        page_size: int | None = None,
        cursor: str | None = None,
    ) -> Page[DeliveryView]:
        return await self.store.list_deliveries(query, page, page_size, cursor)

    async def delivery(self, delivery_id: int) -> DeliveryDetail:
        return await self.store.get_delivery(delivery_id)

    async def resend(
        self, delivery_id: int, *, operator: str = "library", request_id: str | None = None
    ) -> ResendResult:
        return await self.store.resend(delivery_id, operator, request_id or uuid.uuid4().hex)
