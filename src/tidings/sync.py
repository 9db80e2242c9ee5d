"""`SyncHub`: the Hub for code that is not async (Django, Flask, scripts).

It runs the async Hub on a private event loop in a background thread. `publish(conn=...)`
takes the caller's own sync SQLAlchemy connection and runs in the caller's thread and
transaction, so the event commits or rolls back with the caller's change.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tidings.channel_rules import DEFAULT_LEASE_S
from tidings.core import validate
from tidings.core.model import (
    Channel,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Page,
    PublishResult,
    ResendResult,
)
from tidings.hub import EventLike, Hub, as_input
from tidings.store.clock import AppClock, utc_now

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from tidings.channels.registry import Registry

T = TypeVar("T")


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="tidings-sync", daemon=True
        )
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class SyncChannels:
    def __init__(self, hub: Hub, loop: _Loop) -> None:
        self._hub = hub
        self._loop = loop

    def create(self, **fields: Any) -> Channel:
        return self._loop.call(self._hub.channels.create(**fields))

    def ensure(self, **fields: Any) -> Channel:
        return self._loop.call(self._hub.channels.ensure(**fields))

    def get(self, channel_id: int) -> Channel:
        return self._loop.call(self._hub.channels.get(channel_id))

    def get_by_name(self, name: str) -> Channel:
        return self._loop.call(self._hub.channels.get_by_name(name))

    def list(self) -> list[Channel]:
        return self._loop.call(self._hub.channels.list())

    def update(self, channel_id: int, **changes: Any) -> Channel:
        return self._loop.call(self._hub.channels.update(channel_id, **changes))

    def enable(self, channel_id: int) -> Channel:
        return self._loop.call(self._hub.channels.enable(channel_id))

    def disable(self, channel_id: int, reason: str | None = None) -> int:
        return self._loop.call(self._hub.channels.disable(channel_id, reason))

    def delete(self, channel_id: int) -> None:
        self._loop.call(self._hub.channels.delete(channel_id))


class SyncHub:
    """`Hub` for sync code; the same arguments, and channels checked the same way."""

    def __init__(
        self,
        url: str,
        *,
        clock: AppClock = utc_now,
        registry: Registry | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        hub = Hub(url, clock=clock, registry=registry, lease_s=lease_s)
        self._loop = _Loop()
        self._hub = hub
        self.channels = SyncChannels(self._hub, self._loop)

    def __enter__(self) -> SyncHub:
        self._loop.call(self._hub.__aenter__())  # warmed as `Hub` is (`Store.warm`)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._loop.call(self._hub.close())
        self._loop.stop()

    def migrate(self) -> None:
        self._loop.call(self._hub.migrate())

    def publish(self, *, conn: Connection | None = None, **fields: Any) -> PublishResult:
        (result,) = self.publish_many([validate.event_input(**fields)], conn=conn)
        return result

    def publish_many(
        self, items: Sequence[EventLike], *, conn: Connection | None = None
    ) -> list[PublishResult]:
        if conn is None:
            return self._loop.call(self._hub.publish_many(items))
        return self._hub.store.publish_in(conn, [as_input(item) for item in items])

    def get_event(self, event_id: int) -> PublishResult:
        return self._loop.call(self._hub.get_event(event_id))

    def deliveries(
        self,
        query: DeliveryQuery | None = None,
        *,
        page: int | None = None,
        page_size: int | None = None,
        cursor: str | None = None,
    ) -> Page[DeliveryView]:
        return self._loop.call(
            self._hub.deliveries(query, page=page, page_size=page_size, cursor=cursor)
        )

    def delivery(self, delivery_id: int) -> DeliveryDetail:
        return self._loop.call(self._hub.delivery(delivery_id))

    def resend(
        self, delivery_id: int, *, operator: str = "library", request_id: str | None = None
    ) -> ResendResult:
        return self._loop.call(
            self._hub.resend(delivery_id, operator=operator, request_id=request_id)
        )
