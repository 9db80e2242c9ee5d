"""What operators change: channels (with C7's disable transition), API tokens and the admin
UI's sessions (S5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection

from tidings.core.model import Channel, ChannelSpec
from tidings.store import channel_ops, health, sessions, tokens
from tidings.store.clock import TxClock
from tidings.store.runner import Op, Runner, T


class AdminWrites(Runner):
    def _channels_changed(self) -> None:
        """Called once this process has changed channels (or tried to)."""

    async def _change_channels(self, op: Op[T], *args: Any) -> T:
        try:
            return await self._run(op, *args)
        finally:
            self._channels_changed()

    async def create_channel(self, spec: ChannelSpec) -> Channel:
        return await self._change_channels(channel_ops.create, spec)

    async def update_channel(self, channel_id: int, spec: ChannelSpec) -> Channel:
        return await self._change_channels(channel_ops.update_spec, channel_id, spec)

    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        """Merge keys into a channel's config (a provider-requested change, not an edit).
        Nothing a fan-out reads changes, so the channels known for publishing stay."""
        await self._run(channel_ops.merge_config, channel_id, changes)

    async def enable_channel(self, channel_id: int) -> Channel:
        """Enable, and start its health afresh (an operator vouches for it again)."""

        def op(conn: Connection, clock: TxClock) -> Channel:
            channel, _ = channel_ops.set_enabled(conn, clock, channel_id, True, None)
            health.reset(conn, channel_id)
            return channel

        return await self._change_channels(op)

    async def disable_channel(self, channel_id: int, reason: str | None = None) -> int:
        """C7: disable and skip its pending deliveries; returns how many were skipped."""
        _, skipped = await self._change_channels(channel_ops.set_enabled, channel_id, False, reason)
        return skipped

    async def apply_channels(
        self,
        creates: Sequence[ChannelSpec],
        updates: Sequence[tuple[int, ChannelSpec]],
        disables: Sequence[int],
        reason: str,
    ) -> None:
        """Create, update and disable (C7) channels in one transaction: all or nothing."""

        def op(conn: Connection, clock: TxClock) -> None:
            for spec in creates:
                channel_ops.create(conn, clock, spec)
            for channel_id, changed in updates:
                channel_ops.update_spec(conn, clock, channel_id, changed)
            for channel_id in disables:
                channel_ops.set_enabled(conn, clock, channel_id, False, reason)

        await self._change_channels(op)

    async def delete_channel(self, channel_id: int) -> None:
        await self._change_channels(lambda conn, _clock: channel_ops.remove(conn, channel_id))

    async def create_token(
        self,
        name: str,
        scopes: Sequence[str],
        token_hash: str,
        *,
        expires_in_s: float | None = None,
        ceiling: Mapping[str, Sequence[str] | None] | None = None,
    ) -> tokens.TokenInfo:
        return await self._run(tokens.create, name, list(scopes), token_hash, expires_in_s, ceiling)

    async def revoke_token(self, token_id: int) -> tokens.TokenInfo:
        """Revoke the token and end its UI sessions; NotFound for an unknown id."""
        return await self._run(tokens.revoke, token_id)

    async def mark_tokens_used(self, ids: Sequence[int], every_s: float) -> int:
        return await self._run(tokens.mark_used, list(ids), every_s, one_statement=True)

    # -- admin UI sessions (S5) ------------------------------------------------------------

    async def open_session(
        self, session_hash: str, token_id: int, *, lifetime_s: float, idle_s: float
    ) -> None:
        await self._run(sessions.open_session, session_hash, token_id, lifetime_s, idle_s)

    async def touch_session(self, session_hash: str) -> None:
        await self._run(sessions.touch, session_hash, one_statement=True)

    async def end_session(self, session_hash: str) -> int:
        return await self._run(lambda conn, _clock: sessions.end(conn, session_hash))
