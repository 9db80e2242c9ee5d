"""The express claim (C1, C6, C7, H1 on PostgreSQL): a realtime claim as one statement sent
without BEGIN and COMMIT, for the common case — a channel without a rate limit, a deadline,
a provider's pause or an unhealthy breaker — and due rows that no lease has held before.

It leases only where all of that still holds when the statement runs, so it never takes a
row the full claim (`tidings.store.claims.claim_realtime`) would not; anything else (no such
rows, or a channel that needs the full claim's checks) answers None, and the caller makes
the full claim. Rows of a lease that ran out are left to it too (their audit rows), as are
the sweep's rows (C2, O5). One round trip, events included, where the full claim makes six,
and the claim's commit does not wait for the WAL flush (a claim lost in a crash is re-sent,
never lost). The store gathers the express claims asked at once, of many channels, into
one statement (`claim_many`), each claim under its own token.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    Select,
    Text,
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
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

from tidings.core import jsontext
from tidings.core.model import Channel, Claim, ClaimedDelivery, Event
from tidings.core.states import Mode, State
from tidings.store import rows
from tidings.store.channel_ops import load_channel
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.direct import Direct
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
#: Express claims one statement takes at most (each of up to a claim's size).
MAX_ASKS = 64
#: Statements of gathered express claims one process runs at once, of small claims and of
#: large ones each: a quiet channel's claim need not wait for a backlog's to come back. One
#: each: the claims asked while it runs go together in the next. With two, a dispatcher of
#: ten thousand small channels sent a third more statements, each smaller, for ~4 % more
#: of its CPU a delivery.
GROUPS_IN_FLIGHT = 1
#: The most rows a claim may ask for and still gather with the small ones. A backlog's
#: claim of hundreds of rows takes ~30 ms on a busy server, a quiet channel's a few:
#: gathered together, or queued behind it, the quiet one took as long.
SMALL_ASK = 64


@dataclass(frozen=True)
class Ask:
    """One caller's express claim: up to `limit` due rows of `channel` (the caller's copy;
    a changed one is read again), leased to `owner` for `lease_s`."""

    channel: Channel
    limit: int
    lease_s: float
    owner: str
    known: Mapping[int, Event] | None = None


def may_serve(channel: Channel, limit: int) -> bool:
    """Whether the caller's copy of `channel` may be claimed express at all (the statement
    checks the stored channel again)."""
    return (
        limit > 0
        and channel.mode is Mode.REALTIME
        and channel.rate_per_min <= 0
        and not channel.max_age_s
    )


def claim_many(conn: Connection, clock: TxClock, asks: Sequence[Ask]) -> list[Claim | None]:
    """Each ask's claim, or None where it leased nothing: the asks of many channels in one
    statement (a dispatcher with ten thousand small channels claims for dozens at a time).
    Asks that cannot share one (the same channel twice, another owner or lease) go in the
    next statement; every statement is atomic on its own."""
    answers: list[Claim | None] = [None] * len(asks)
    if not dialect_for(conn).express_claims:
        return answers
    for together in shared_statements(asks):
        params, tokens = parameters(together)
        taken = by_token(conn.execute(statement_for(together), params).mappings())
        current = {i: load_channel(conn, i) for i in changed_channels(taken, together, tokens)}
        for n, claim in claims_of(taken, together, tokens, current):
            answers[n] = claim
    return answers


async def claim_many_direct(
    direct: Direct, asks: Sequence[Ask], load: LoadChannels
) -> list[Claim | None]:
    """`claim_many` on the store's own driver connection (`tidings.store.direct`); channels
    changed since the caller read them are read again through `load`."""
    answers: list[Claim | None] = [None] * len(asks)
    for together in shared_statements(asks):
        params, tokens = parameters(together)
        statement = statement_for(together, relaxed_by_session=direct.relaxed_commits)
        taken = by_token(await direct.fetch(statement, params))
        stale = changed_channels(taken, together, tokens)
        current = await load(stale) if stale else {}
        for n, claim in claims_of(taken, together, tokens, current):
            answers[n] = claim
    return answers


async def warm_direct(direct: Direct) -> None:
    """Send one ask's express claim once, of no channel (id 0): it runs as a claim does
    and leases nothing."""
    statement = _one_ask(relaxed_by_session=direct.relaxed_commits)
    nothing = {"channel": 0, "size": 0, "token": "", "lease_s": 0.0, "owner": ""}
    await direct.fetch(statement, nothing)


#: Reads channels again by id (None for one deleted since).
LoadChannels = Callable[[list[int]], Awaitable[Mapping[int, Channel | None]]]
Together = list[tuple[int, Ask]]
Taken = dict[str, list[Mapping[Any, Any]]]


def shared_statements(asks: Sequence[Ask]) -> Iterator[Together]:
    """The asks the express claim may serve, statement by statement, each with its place in
    `asks`: distinct channels, one owner and one lease in each."""
    if len(asks) == 1:  # an idle dispatcher's one claim
        if may_serve(asks[0].channel, asks[0].limit):
            yield [(0, asks[0])]
        return
    pending = [n for n, ask in enumerate(asks) if may_serve(ask.channel, ask.limit)]
    while pending:
        first = asks[pending[0]]
        together: dict[int, int] = {}  # channel id -> the ask's position
        later: list[int] = []
        for n in pending:
            ask = asks[n]
            shared = (ask.owner, ask.lease_s) == (first.owner, first.lease_s)
            if shared and ask.channel.id not in together:
                together[ask.channel.id] = n
            else:
                later.append(n)
        yield [(n, asks[n]) for n in together.values()]
        pending = later


def statement_for(together: Together, *, relaxed_by_session: bool = False) -> Select[Any]:
    """The statement of these asks: one ask's own form, or the form of many."""
    if len(together) == 1:
        return _one_ask(relaxed_by_session=relaxed_by_session)
    return _statement(relaxed_by_session=relaxed_by_session)


def parameters(together: Together) -> tuple[dict[str, Any], list[str]]:
    """The parameters of `statement_for(together)`, and each ask's new lease token."""
    if len(together) == 1:
        _, ask = together[0]
        token = os.urandom(16).hex()  # `secrets.token_hex`, without its three calls
        one = {"channel": ask.channel.id, "size": ask.limit, "token": token}
        return one | {"lease_s": ask.lease_s, "owner": ask.owner}, [token]
    tokens: list[str] = []
    channel_ids: list[str] = []
    limits: list[str] = []
    for _, ask in together:  # one loop, not a comprehension (a call) per list
        tokens.append(os.urandom(16).hex())  # `secrets.token_hex`, without its three calls
        channel_ids.append(str(ask.channel.id))
        limits.append(str(ask.limit))
    _, first = together[0]
    params = {
        "channels": ",".join(channel_ids),
        "limits": ",".join(limits),
        "tokens": ",".join(tokens),  # hexadecimal: no comma in them
        "lease_s": first.lease_s,
        "owner": first.owner,
    }
    return params, tokens


def by_token(found: Iterable[Mapping[Any, Any]]) -> Taken:
    taken: Taken = {}
    for row in found:
        taken.setdefault(row["lease_token"], []).append(row)
    return taken


def changed_channels(taken: Taken, together: Together, tokens: list[str]) -> list[int]:
    """Channels that leased rows and changed since the caller read them."""
    stale = []
    for token, (_, ask) in zip(tokens, together, strict=True):
        found = taken.get(token)
        if found and found[0][CHANNEL_UPDATED_AT] != ask.channel.updated_at:
            stale.append(ask.channel.id)
    return stale


def claims_of(
    taken: Taken, together: Together, tokens: list[str], current: Mapping[int, Channel | None]
) -> Iterator[tuple[int, Claim]]:
    """Each ask's claim, by its position, where it leased rows; a channel changed since the
    caller read it is the one in `current` (none, when it was deleted: its rows went too)."""
    for token, (n, ask) in zip(tokens, together, strict=True):
        found = taken.get(token)
        if not found:
            continue
        channel = current.get(ask.channel.id, ask.channel)
        if channel is not None:
            yield n, _claim_of(ask, channel, token, found)


def _claim_of(ask: Ask, channel: Channel, token: str, taken: list[Mapping[Any, Any]]) -> Claim:
    known = ask.known or {}
    items = [ClaimedDelivery(rows.delivery(r), _event(r, known)) for r in taken]
    if len(items) > 1:
        items.sort(key=_delivery_id)
    return Claim(token, ask.owner, channel, items, items[0].delivery.next_attempt_at)


def _delivery_id(item: ClaimedDelivery) -> int:
    return item.delivery.id


def _event(row: Mapping[Any, Any], known: Mapping[int, Event]) -> Event:
    """The row's event: the caller's copy when it has one (immutable, E3), else decoded
    from the columns the statement joined (its JSON as text, decoded only here)."""
    found = known.get(row["event_id"])
    if found is not None:
        return found
    # Built from the row's own columns: an event per leased row when each event goes to
    # one channel, where a dict of them first and `rows.event` after cost ~2 % of a send.
    return Event(
        id=row["ev_id"],
        kind=row["ev_kind"],
        subject=row["ev_subject"],
        severity=rows.SEVERITIES[row["ev_severity"]],
        title=row["ev_title"],
        body=row["ev_body"],
        url=row["ev_url"],
        labels=jsontext.loads(row["ev_labels"]),  # a fresh dict each
        data=jsontext.loads(row["ev_data"]),
        tenant=row["ev_tenant"],
        idempotency_key=row["ev_idempotency_key"],
        created_at=row["ev_created_at"],
        traceparent=row["ev_traceparent"],
    )


def _joined(name: str, type_: ARRAY[Any]) -> ColumnElement[Any]:
    """An array parameter sent as one text of its elements joined by commas (`parameters`):
    the driver checks a list for being a sequence, and each element for not being one,
    with abstract-base-class checks that cost more than the elements' encoding, and
    SQLAlchemy runs an array's bind processor over it first."""
    return cast(func.string_to_array(bindparam(name, type_=Text), literal_column("','")), type_)


def _relaxed(relaxed_by_session: bool) -> list[ColumnElement[Any]]:
    """The claim's commit skips waiting for its WAL flush: the statement says so itself
    (`set_config(…, true)`, local to its transaction) unless its connection was opened
    with it (`relaxed_by_session`, the store's own claim connections), where the setting
    cost ~0.03 ms of each claim's ~0.5 ms on an idle server."""
    if relaxed_by_session:
        return []
    return [func.set_config("synchronous_commit", "off", True).label("relaxed")]


def _servable() -> list[ColumnElement[bool]]:
    """The stored channel's own conditions for an express claim (`may_serve`, and neither
    a provider's pause nor a breaker's row)."""
    now = func.now()
    paused = exists().where(
        rate_buckets.c.channel_id == channels.c.id, rate_buckets.c.paused_until > now
    )
    unhealthy = exists().where(channel_health.c.channel_id == channels.c.id)  # healthy: no row
    return [
        channels.c.enabled,
        channels.c.mode == Mode.REALTIME.value,
        channels.c.rate_per_min <= 0,
        channels.c.max_age_s.is_(None),
        not_(paused),
        not_(unhealthy),
    ]


def _due(channel_id: ColumnElement[Any], size: ColumnElement[Any]) -> Select[Any]:
    """Up to `size` due pending rows of the channel, oldest first, locked (skipping rows
    another claim holds)."""
    return (
        select(d.c.id)
        .where(
            d.c.channel_id == channel_id,
            guard("claim", now=func.now()),
            state_in([State.PENDING]),
        )
        .order_by(d.c.next_attempt_at, d.c.id)
        .limit(size)
        .with_for_update(skip_locked=True)
    )


def _leased(row_id: ColumnElement[Any], token: ColumnElement[Any]) -> Any:
    """`UPDATE deliveries … WHERE id = row_id RETURNING *`: the row leased under `token`."""
    lease_end = func.now() + type_coerce(bindparam("lease_s", type_=Float), Float) * literal_column(
        "interval '1 second'"
    )
    return (
        update(d)
        .where(d.c.id == row_id)
        .values(
            state=target("claim"),
            attempts=d.c.attempts + 1,
            next_attempt_at=type_coerce(lease_end, UTCDateTime),
            lease_token=token,
            lease_owner=bindparam("owner"),
        )
        .returning(*d.c)
        .cte("taken")
    )


def _with_events(taken: Any, ch: Any) -> Select[Any]:
    """`SELECT taken.*, ch.updated_at, the events`: the events come along (no second round
    trip); JSON as text, decoded only for events the caller does not know (an event fanned
    out to many channels is decoded once)."""
    updated_at = ch.c.updated_at.label(CHANNEL_UPDATED_AT)
    event_columns = [
        (cast(c, Text) if c.name in ("labels", "data") else c).label(EVENT_PREFIX + c.name)
        for c in events.c
    ]
    return (
        select(taken, updated_at, *event_columns)
        .select_from(taken.join(ch, ch.c.channel_id == taken.c.channel_id))
        .join(events, events.c.id == taken.c.event_id)
    )


@functools.cache
def _one_ask(*, relaxed_by_session: bool = False) -> Select[Any]:
    """One ask's claim (an idle dispatcher's, of one channel): `WITH ch (the channel, where
    the express claim may serve it), taken (UPDATE of its due rows, by key, RETURNING)
    SELECT taken.*, ch.updated_at, the events`.

    Without the arrays, sorts and joins that pair many asks with their tokens, the server
    ran it in ~0.25 ms where the form of many asks took ~0.4 ms for the same one ask. The
    rows go to the UPDATE as an array's elements, which the planner takes for a handful
    (`_statement` says why)."""
    channel_id = bindparam("channel", type_=BigInteger)
    ch = (
        select(
            channels.c.id.label("channel_id"),
            channels.c.updated_at,
            *_relaxed(relaxed_by_session),
        )
        .where(channels.c.id == channel_id, *_servable())
        .cte("ch")
        .prefix_with("MATERIALIZED")
    )
    # The size as a subquery's answer, which no plan can know: given as a value, each
    # execution's own plan saw it and the one plan kept for all could not, so the server
    # judged the kept plan costlier and planned every claim again (~0.4 ms of each).
    size = select(bindparam("size", type_=Integer)).scalar_subquery()
    # Only the rows of a channel the claim may serve are locked.
    due = _due(channel_id, size).where(exists(ch.select()))
    picked = (
        func.unnest(func.array(due.scalar_subquery()))
        .table_valued("id")
        .render_derived()
        .alias("picked")
    )
    return _with_events(_leased(picked.c.id, bindparam("token", type_=Text)), ch)


@functools.cache
def _statement(*, relaxed_by_session: bool = False) -> Select[Any]:
    """`WITH asked (channel, limit, token per ask), ch (the asked channels the express claim
    may serve), picked (each one's due pending rows, locked), taken (UPDATE … RETURNING)
    SELECT taken.*, ch.updated_at, the events`. Built once for each connection kind."""
    asked = (
        func.unnest(
            _joined("channels", ARRAY(BigInteger)),
            _joined("limits", ARRAY(Integer)),
            _joined("tokens", ARRAY(Text)),
        )
        .table_valued("channel_id", "size", "token")
        .render_derived()
        .alias("asked")
    )
    ch = (
        select(
            asked.c.channel_id,
            asked.c.size,
            asked.c.token,
            channels.c.updated_at,
            *_relaxed(relaxed_by_session),
        )
        .select_from(asked.join(channels, channels.c.id == asked.c.channel_id))
        .where(*_servable())
        .cte("ch")
        .prefix_with("MATERIALIZED")
    )
    due = _due(ch.c.channel_id, ch.c.size).lateral("due")
    picked = (
        select(due.c.id, ch.c.token)
        .select_from(ch.join(due, true()))
        .cte("picked")
        .prefix_with("MATERIALIZED")
    )
    # The rows are updated by primary key whatever the planner guesses of `picked`: it
    # cannot know the asks' sizes and guesses a tenth of a channel's rows, so with one
    # channel holding most of the table (a backlog) it joined `picked` to a scan of every
    # delivery (~30 ms a claim, however small). Passed through arrays, the picked rows are
    # a function's output, which it takes for a handful of rows: one lookup each. (Both
    # arrays in id order, so each id keeps its token.)
    in_order = picked.c.id
    by_id = (
        func.unnest(
            func.array(select(picked.c.id).order_by(in_order).scalar_subquery()),
            func.array(select(picked.c.token).order_by(in_order).scalar_subquery()),
        )
        .table_valued("id", "token")
        .render_derived()
        .alias("by_id")
    )
    return _with_events(_leased(by_id.c.id, by_id.c.token), ch)
