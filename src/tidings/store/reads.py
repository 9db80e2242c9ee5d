"""The store's reads: history (M2), channels, what is due, the dashboard, metrics and tokens.

Each runs as one read transaction (on PostgreSQL without BEGIN and COMMIT).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy.engine import Connection

from tidings.core.breaker import Health
from tidings.core.model import (
    Channel,
    ChannelRef,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Page,
    PublishResult,
)
from tidings.store import (
    channel_ops,
    dashboard,
    health,
    history,
    inbox,
    scheduling,
    sessions,
    stats,
    tokens,
)
from tidings.store.clock import TxClock
from tidings.store.gather import Gathered
from tidings.store.runner import Runner

#: Token lookups one statement answers at most; such statements run at most 4 at a time.
MAX_TOKEN_LOOKUPS = 500


class Reads(Runner):
    #: History totals up to this many rows are exact, beyond it estimated (M2).
    exact_total_up_to: int = history.EXACT_TOTAL_UP_TO

    # -- channels -------------------------------------------------------------------------

    async def get_channel(self, channel_id: int) -> Channel:
        return await self._run(lambda c, _: channel_ops.get(c, channel_id), read_only=True)

    async def get_channel_by_name(self, name: str) -> Channel:
        return await self._run(lambda c, _: channel_ops.get_by_name(c, name), read_only=True)

    async def list_channels(self) -> list[Channel]:
        return await self._run(lambda c, _: channel_ops.list_all(c), read_only=True)

    async def channels_page(
        self, after_id: int, limit: int, name_contains: str | None = None
    ) -> list[Channel]:
        """A page of channels in id order (a list of ten thousand is read a page at a time)."""
        return await self._run(
            lambda c, _: channel_ops.list_page(c, after_id, limit, name_contains), read_only=True
        )

    async def count_channels(self) -> int:
        return await self._run(lambda c, _: channel_ops.count(c), read_only=True)

    async def channel_refs(self) -> list[ChannelRef]:
        """Every channel's id, name and kind: what naming them takes, and no more."""
        return await self._run(lambda c, _: channel_ops.refs(c), read_only=True)

    # -- history (M2) ---------------------------------------------------------------------

    async def list_deliveries(
        self,
        query: DeliveryQuery | None = None,
        page: int | None = None,
        page_size: int | None = None,
        cursor: str | None = None,
    ) -> Page[DeliveryView]:
        """The page `cursor` (from an earlier answer) points at, else page number `page`."""
        limit = self.exact_total_up_to

        def op(conn: Connection, _clock: TxClock) -> Page[DeliveryView]:
            chosen = query or DeliveryQuery()
            return history.list_deliveries(conn, chosen, page, page_size, cursor, limit)

        return await self._run(op, read_only=True)

    async def get_delivery(self, delivery_id: int) -> DeliveryDetail:
        return await self._run(lambda c, _: history.get_delivery(c, delivery_id), read_only=True)

    async def get_event(self, event_id: int) -> PublishResult:
        return await self._run(lambda c, _: history.get_event(c, event_id), read_only=True)

    # -- what is due, and C5 --------------------------------------------------------------

    async def due_channels(
        self, known: Mapping[int, Channel] | None = None, *, now: datetime | None = None
    ) -> list[Channel]:
        """Enabled channels with due rows; a channel in `known` (a caller's earlier answer)
        that has not changed since is answered as it was, not read again."""
        return await self._run(scheduling.due_channels, known, now=now, read_only=True)

    async def next_due_at(self) -> datetime | None:
        return await self._run(lambda c, _: scheduling.next_due_at(c), read_only=True)

    async def largest_timeout(self) -> tuple[float, str] | None:
        return await self._run(lambda c, _: scheduling.largest_timeout(c), read_only=True)

    # -- the inbox, statistics and the admin UI -------------------------------------------

    async def inbox_recent(
        self, channel_id: int | None = None, limit: int = 50
    ) -> list[inbox.InboxMessage]:
        return await self._run(lambda c, _: inbox.recent(c, channel_id, limit), read_only=True)

    async def live_delivery_counts(self) -> dict[tuple[int, str], int]:
        """(channel id, state) -> deliveries pending or sending (the queue)."""
        return await self._run(lambda c, _: stats.live_counts_by_channel(c), read_only=True)

    async def oldest_pending(self) -> list[tuple[str, datetime]]:
        return await self._run(lambda c, _: stats.oldest_pending_by_channel(c), read_only=True)

    async def channel_health(
        self, channel_ids: Sequence[int] | None = None, *, now: datetime | None = None
    ) -> dict[int, dashboard.ChannelHealth]:
        """Per channel id (of `channel_ids`, else every channel): last success, failed
        attempts in the last hour, open rows, oldest."""
        ids = None if channel_ids is None else list(channel_ids)
        return await self._run(dashboard.channel_health, ids, now=now, read_only=True)

    async def state_counts(self) -> dict[str, int]:
        return await self._run(lambda c, _: dashboard.state_counts(c), read_only=True)

    async def hourly_attempts(
        self, hours: int = 24, *, now: datetime | None = None
    ) -> list[dashboard.HourBucket]:
        """Delivered and failed attempts per hour over the last `hours`, oldest first."""
        return await self._run(dashboard.hourly_attempts, hours, now=now, read_only=True)

    async def failed_ids(self, query: DeliveryQuery, limit: int) -> tuple[list[int], int]:
        """The failed rows a history filter matches (at most `limit`, oldest first), and the
        total: what a bulk resend would requeue."""
        return await self._run(lambda c, _: dashboard.failed_ids(c, query, limit), read_only=True)

    async def breakers(self) -> dict[int, Health]:
        """Every channel's breaker that is not plain healthy, by channel id (H1)."""
        return await self._run(lambda c, _: health.health_of(c), read_only=True)

    # -- API tokens -----------------------------------------------------------------------

    async def find_token(self, token_hash: str) -> tokens.TokenInfo | None:
        """The live token with this hash: not revoked, not expired. Asked as the request
        arrives, never from a cache, so a revocation holds for every later request; the
        lookups of concurrent requests are gathered into one statement (each is answered by
        a statement sent after it was asked)."""
        return await self._token_lookups(token_hash)

    @functools.cached_property
    def _token_lookups(self) -> Gathered[str, tokens.TokenInfo | None]:
        return Gathered(self._find_tokens, max_items=MAX_TOKEN_LOOKUPS, in_flight=4)

    async def _find_tokens(self, hashes: list[str]) -> list[tokens.TokenInfo | Exception | None]:
        found = await self._run(tokens.find_many, hashes, read_only=True)
        return [found.get(h) for h in hashes]

    async def list_tokens(self) -> list[tokens.TokenInfo]:
        return await self._run(lambda c, _: tokens.list_all(c), read_only=True)

    async def find_session(
        self, session_hash: str, *, idle_s: float, touch_every_s: float
    ) -> sessions.SessionInfo | None:
        """A live session (and its live token), or None."""
        return await self._run(sessions.find, session_hash, idle_s, touch_every_s, read_only=True)

    async def count_tokens(self) -> int:
        return await self._run(lambda c, _: tokens.count(c), read_only=True)
