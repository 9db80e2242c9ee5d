"""Channel CRUD and the enable/disable transitions (C7)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.engine import Connection

from tidings.core.errors import Conflict, NotFound
from tidings.core.model import Channel, ChannelRef, ChannelSpec
from tidings.core.states import SkipReason
from tidings.store import buckets, sealing
from tidings.store.clock import TxClock
from tidings.store.schema import channels, deliveries, is_live
from tidings.store.transitions import guard, target

# Read at the start of every claim: built once, its id bound at execution.
_BY_ID = select(channels).where(channels.c.id == bindparam("channel"))


def load_channel(conn: Connection, channel_id: int) -> Channel | None:
    row = conn.execute(_BY_ID, {"channel": channel_id}).mappings().first()
    return None if row is None else sealing.channel(conn, row)


def get(conn: Connection, channel_id: int) -> Channel:
    channel = load_channel(conn, channel_id)
    if channel is None:
        raise NotFound("channel", channel_id)
    return channel


def get_by_name(conn: Connection, name: str) -> Channel:
    row = conn.execute(select(channels).where(channels.c.name == name)).mappings().first()
    if row is None:
        raise NotFound("channel", name)
    return sealing.channel(conn, row)


def count(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(channels)).scalar_one())


def refs(conn: Connection) -> list[ChannelRef]:
    """Every channel's id, name and kind, in id order: no config read, no secret opened."""
    c = channels.c
    found = conn.execute(select(c.id, c.name, c.kind).order_by(c.id))
    return [ChannelRef(int(i), str(name), str(kind)) for i, name, kind in found]


def list_page(
    conn: Connection, after_id: int, limit: int, name_contains: str | None
) -> list[Channel]:
    """Up to `limit` channels after `after_id` in id order, whose name holds `name_contains`
    (any case) when given: only theirs are opened."""
    query = select(channels).where(channels.c.id > after_id)
    if name_contains:
        needle = name_contains.lower()
        query = query.where(func.lower(channels.c.name).contains(needle, autoescape=True))
    found = conn.execute(query.order_by(channels.c.id).limit(limit)).mappings()
    return [sealing.channel(conn, r) for r in found]


def list_all(conn: Connection) -> list[Channel]:
    found = conn.execute(select(channels).order_by(channels.c.id)).mappings()
    return [sealing.channel(conn, r) for r in found]


def create(conn: Connection, clock: TxClock, spec: ChannelSpec) -> Channel:
    _ensure_name_free(conn, spec.name, None)
    now = clock.now()
    values = _spec_values(conn, now, spec) | {
        "created_at": now,
        "updated_at": now,
        "disabled_reason": None,
    }
    row = conn.execute(channels.insert().values(values).returning(*channels.c)).mappings().one()
    buckets.create(conn, row["id"], spec.rate_burst, now)
    return sealing.channel(conn, row)


def update_spec(conn: Connection, clock: TxClock, channel_id: int, spec: ChannelSpec) -> Channel:
    """Store a whole new spec; a change to disabled runs the disable transition too."""
    current = get(conn, channel_id)
    _ensure_name_free(conn, spec.name, channel_id)
    now = clock.now()
    values = _spec_values(conn, now, spec) | {"updated_at": now}
    if spec.enabled and not current.enabled:
        values["disabled_reason"] = None
    conn.execute(update(channels).where(channels.c.id == channel_id).values(values))
    if current.enabled and not spec.enabled:
        _skip_pending(conn, channel_id)
    return get(conn, channel_id)


def set_enabled(
    conn: Connection, clock: TxClock, channel_id: int, enabled: bool, reason: str | None
) -> tuple[Channel, int]:
    """Enable, or disable and skip its pending rows (C7). Skipped rows are not revived by a
    later enable; a resend revives them. Returns the channel and how many rows were skipped."""
    get(conn, channel_id)
    conn.execute(
        update(channels)
        .where(channels.c.id == channel_id)
        .values(
            enabled=enabled,
            disabled_reason=None if enabled else reason,
            updated_at=clock.now(),
        )
    )
    skipped = 0 if enabled else _skip_pending(conn, channel_id)
    return get(conn, channel_id), skipped


def remove(conn: Connection, channel_id: int) -> None:
    """Delete a channel and its history; refused while deliveries are still on their way."""
    get(conn, channel_id)
    live = conn.scalar(
        select(func.count())
        .select_from(deliveries)
        .where(
            deliveries.c.channel_id == channel_id,
            is_live(),
        )
    )
    if live:
        raise Conflict(
            f"channel {channel_id} has {live} pending or sending deliveries; "
            "disable it first (its pending deliveries become skipped), then delete it"
        )
    conn.execute(delete(channels).where(channels.c.id == channel_id))


def _skip_pending(conn: Connection, channel_id: int) -> int:
    stmt = (
        update(deliveries)
        .where(deliveries.c.channel_id == channel_id, guard("skip"))
        .values(state=target("skip"), skip_reason=SkipReason.CHANNEL_DISABLED.value)
    )
    return conn.execute(stmt).rowcount


def _ensure_name_free(conn: Connection, name: str, own_id: int | None) -> None:
    found = conn.scalar(select(channels.c.id).where(channels.c.name == name))
    if found is not None and found != own_id:
        raise Conflict(f"a channel named {name!r} already exists (id {found})")


def _spec_values(conn: Connection, now: datetime, spec: ChannelSpec) -> dict[str, Any]:
    """The row's values; the config's secret values sealed (S4)."""
    values = asdict(spec)
    values["mode"] = spec.mode.value
    values.update(sealing.sealed(conn, now, spec.kind, spec.config))
    return values


def merge_config(
    conn: Connection, clock: TxClock, channel_id: int, changes: dict[str, Any]
) -> None:
    """Change some config values; a value None removes its key."""
    current = get(conn, channel_id)
    now = clock.now()
    merged = {k: v for k, v in (current.config | changes).items() if v is not None}
    values = sealing.sealed(conn, now, current.kind, merged)
    conn.execute(
        update(channels).where(channels.c.id == channel_id).values(**values, updated_at=now)
    )
