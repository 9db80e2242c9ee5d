"""The express claim (C1, C6, C7, H1 on PostgreSQL): a realtime claim as one statement sent
without BEGIN and COMMIT, for the common case — a channel without a rate limit, a deadline,
a provider's pause or an unhealthy breaker — and due rows that no lease has held before.

It leases only where all of that still holds when the statement runs, so it never takes a
row the full claim (`tidings.store.claims.claim_realtime`) would not; anything else (no such
rows, or a channel that needs the full claim's checks) answers None, and the caller makes
the full claim. Rows of a lease that ran out are left to it too (their audit rows), as are
the sweep's rows (C2, O5). One round trip, events included, where the full claim makes six,
and the claim's commit does not wait for the WAL flush (a claim lost in a crash is re-sent,
never lost).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Float,
    Select,
    Text,
    any_,
    bindparam,
    cast,
    exists,
    func,
    literal_column,
    not_,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.engine import Connection

from tidings.core import jsontext
from tidings.core.model import Channel, Claim, ClaimedDelivery, Event
from tidings.core.states import Mode, State
from tidings.store import rows
from tidings.store.channel_ops import load_channel
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.schema import (
    UTCDateTime,
    channel_health,
    channels,
    deliveries,
    events,
    rate_buckets,
)
from tidings.store.transitions import guard, state_in, target

d = deliveries
#: The channel's `updated_at` as the statement saw it, beside each leased row.
CHANNEL_UPDATED_AT = "channel_updated_at_"
#: The leased row's event columns, beside it.
EVENT_PREFIX = "ev_"


def claim_express(
    conn: Connection,
    _clock: TxClock,
    channel: Channel,
    limit: int,
    lease_s: float,
    owner: str,
    known: Mapping[int, Event] | None = None,
) -> Claim | None:
    """Lease up to `limit` due rows of `channel` in one statement, or None (nothing leased:
    make the full claim). `channel` is the caller's copy; a changed one is read again."""
    if not dialect_for(conn).express_claims or limit <= 0:
        return None
    if channel.mode is not Mode.REALTIME or channel.rate_per_min > 0 or channel.max_age_s:
        return None
    token = secrets.token_hex(16)
    params = {"channel": channel.id, "limit": limit, "lease_s": lease_s}
    taken = conn.execute(_statement(), params | {"token": token, "owner": owner}).mappings().all()
    if not taken:
        return None
    if taken[0][CHANNEL_UPDATED_AT] != channel.updated_at:
        current = load_channel(conn, channel.id)
        if current is None:  # deleted since: its rows went with it
            return None
        channel = current
    known = known or {}
    items = sorted(
        (ClaimedDelivery(rows.delivery(r), _event(r, known)) for r in taken),
        key=lambda item: item.delivery.id,
    )
    return Claim(token, owner, channel, items, items[0].delivery.next_attempt_at)


def _event(row: Mapping[Any, Any], known: Mapping[int, Event]) -> Event:
    """The row's event: the caller's copy when it has one (immutable, E3), else decoded
    from the columns the statement joined (its JSON as text, decoded only here)."""
    found = known.get(row["event_id"])
    if found is not None:
        return found
    values = {c.name: row[EVENT_PREFIX + c.name] for c in events.c}
    values["labels"] = jsontext.loads(values["labels"])
    values["data"] = jsontext.loads(values["data"])
    return rows.event(values)


@functools.cache
def _statement() -> Select[Any]:
    """`WITH ch (the channel, if the express claim may serve it), picked (its due pending
    rows, locked), taken (UPDATE … RETURNING) SELECT taken.*, ch.updated_at`. Built once."""
    cid: BindParameter[int] = bindparam("channel", type_=BigInteger)
    now = func.now()
    paused = exists().where(rate_buckets.c.channel_id == cid, rate_buckets.c.paused_until > now)
    unhealthy = exists().where(channel_health.c.channel_id == cid)  # a healthy one has no row
    ch = (
        select(
            channels.c.updated_at,
            # The claim's commit skips waiting for its WAL flush (local to this statement).
            func.set_config("synchronous_commit", "off", True).label("relaxed"),
        )
        .where(
            channels.c.id == cid,
            channels.c.enabled,
            channels.c.mode == Mode.REALTIME.value,
            channels.c.rate_per_min <= 0,
            channels.c.max_age_s.is_(None),
            not_(paused),
            not_(unhealthy),
        )
        .cte("ch")
    )
    picked = (
        select(d.c.id)
        .where(
            d.c.channel_id == cid,
            guard("claim", now=now),
            state_in([State.PENDING]),
            exists(select(ch.c.updated_at)),
        )
        .order_by(d.c.next_attempt_at, d.c.id)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
        .cte("picked")
        .prefix_with("MATERIALIZED")
    )
    lease_end = now + type_coerce(bindparam("lease_s", type_=Float), Float) * literal_column(
        "interval '1 second'"
    )
    taken = (
        update(d)
        .where(d.c.id == any_(func.array(select(picked.c.id).scalar_subquery())))
        .values(
            state=target("claim"),
            attempts=d.c.attempts + 1,
            next_attempt_at=type_coerce(lease_end, UTCDateTime),
            lease_token=bindparam("token"),
            lease_owner=bindparam("owner"),
        )
        .returning(*d.c)
        .cte("taken")
    )
    updated_at = ch.c.updated_at.label(CHANNEL_UPDATED_AT)
    # The events come along (no second round trip); JSON as text, decoded only for events
    # the caller does not know (an event fanned out to many channels is decoded once).
    event_columns = [
        (cast(c, Text) if c.name in ("labels", "data") else c).label(EVENT_PREFIX + c.name)
        for c in events.c
    ]
    return (
        select(taken, updated_at, *event_columns)
        .select_from(taken.join(ch, true()))
        .join(events, events.c.id == taken.c.event_id)
    )
