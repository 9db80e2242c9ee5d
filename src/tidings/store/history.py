"""Reading history (M2): filtered delivery lists paged by cursor (or by number for the first
pages), their totals, and one delivery with its attempts.

Pages are keyset pages over the delivery id, so any page costs what the first one does: each
filter has an index that yields its rows in id order (see migration 0014). Totals are exact
up to a bound and estimated beyond it, so a count never reads ten million rows.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ClauseElement,
    ColumnElement,
    CompoundSelect,
    Executable,
    Integer,
    Select,
    String,
    bindparam,
    func,
    literal_column,
    select,
    union_all,
)
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from tidings.core import cursor as cursors
from tidings.core.errors import NotFound
from tidings.core.model import (
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Page,
    PublishResult,
    coerce_page,
)
from tidings.core.states import CLAIMABLE, State
from tidings.store import rows
from tidings.store.schema import (
    UTCDateTime,
    attempts,
    channels,
    deliveries,
    events,
    is_ended,
    is_ended_not_sent,
    is_live,
)

d = deliveries
_JOINED = d.join(channels, channels.c.id == d.c.channel_id).join(
    events, events.c.id == d.c.event_id
)
#: Totals up to this many rows are counted; beyond it they are estimated.
EXACT_TOTAL_UP_TO = 10_000
#: How long after its `created_at` a row may at most be stored (given its id). A publish
#: stamps its rows with the time its statement or transaction began and draws their ids a
#: moment later; a row stored longer after its time than this could be missed by a time
#: filter, which reads only ids within this much of the filter's time (see `_id_window`).
STORED_WITHIN = timedelta(hours=1)
#: SQLite has no planner estimate: the share of matches among this many rows (in slices
#: spread over the id range) is scaled to the range instead.
_SQLITE_SAMPLE = 2_000
_SQLITE_SLICES = 4


def list_deliveries(
    conn: Connection,
    query: DeliveryQuery,
    page: int | None,
    page_size: int | None,
    cursor: str | None = None,
    exact_up_to: int = EXACT_TOTAL_UP_TO,
) -> Page[DeliveryView]:
    """A page newest first: the one `cursor` points at, else page number `page` (OFFSET)."""
    at = cursors.decode(cursor) if cursor is not None else None
    used_page, used_size = coerce_page(at.page if at else page, page_size)
    window = _id_window(conn, query)
    if at is not None and not at.older:  # a previous page: read upwards, show newest first
        newer = window.narrowed(above_id=at.after_id)
        found = _fetch(conn, query, newer.conditions(query), False, 0, used_size + 1)
        more_newer, items = len(found) > used_size, found[:used_size][::-1]
        used_page = used_page if more_newer else 1
        more_older = True
    else:
        older = window if at is None else window.narrowed(below_id=at.after_id)
        skip = 0 if at is not None else (used_page - 1) * used_size
        found = _fetch(conn, query, older.conditions(query), True, skip, used_size + 1)
        more_older, items = len(found) > used_size, found[:used_size]
        more_newer = used_page > 1
    total, estimated = count_matching(conn, query, exact_up_to, window)
    return Page(
        items=items,
        total=total,
        page=used_page,
        page_size=used_size,
        total_is_estimate=estimated,
        next_cursor=_cursor(items[-1], True, used_page + 1) if items and more_older else None,
        prev_cursor=_cursor(items[0], False, used_page - 1) if items and more_newer else None,
    )


def _paths(query: DeliveryQuery) -> list[list[ColumnElement[bool]]]:
    """The query's rows split among indexes that each give them in id order: a channel's live
    rows and its ended ones have separate indexes; any other filter has one path."""
    if query.channel_id is not None and query.state is None:
        return [[is_live()], [is_ended()]]
    return [[]]


def _fetch(
    conn: Connection,
    query: DeliveryQuery,
    bounds: list[ColumnElement[bool]],
    newest_first: bool,
    skip: int,
    count: int,
) -> list[DeliveryView]:
    """`count` rows after `skip`, each path read in index order and the answers merged."""
    key = _order_key(query)
    order = key.desc() if newest_first else key
    walk = _walk_ids_on_sqlite(conn, query)
    base = select(*rows.VIEW_COLUMNS).select_from(_JOINED).where(*_conditions(query, walk), *bounds)
    found: list[DeliveryView] = []
    for path in _paths(query):
        stmt = base.where(*path).order_by(order).limit(skip + count)
        found.extend(rows.delivery_view(r) for r in conn.execute(stmt).mappings())
    found.sort(key=lambda v: v.delivery.id, reverse=newest_first)
    return found[skip : skip + count]


def _order_key(query: DeliveryQuery) -> ColumnElement[int]:
    """The id, or for live rows of every channel `id + 0` (in the order and in the cursor's
    bound): the planner then cannot walk the primary key, which PostgreSQL prefers for a
    LIMIT, expecting live rows spread over the table (they are the newest few, and past the
    last of them the walk read every row ever sent: seconds on a last page), nor read the
    rows below a bound by rowid, as SQLite would. Both read the index of live rows and sort
    those instead."""
    if query.state in CLAIMABLE and query.channel_id is None:
        return d.c.id + literal_column("0")
    return d.c.id


def _cursor(view: DeliveryView, older: bool, page: int) -> str:
    at = cursors.Cursor(after_id=view.delivery.id, older=older, page=max(1, page))
    return cursors.encode(at)


def count_matching(
    conn: Connection,
    query: DeliveryQuery,
    exact_up_to: int,
    window: _IdWindow | None = None,
) -> tuple[int, bool]:
    """How many rows match, and whether that is an estimate: a count that stops one row past
    `exact_up_to`, and beyond it the planner's estimate (PostgreSQL) or a sampled one.
    `window`: the query's `_id_window`, where the caller has it already."""
    source = d.join(events, events.c.id == d.c.event_id) if _needs_event(query) else d
    if window is None:
        window = _id_window(conn, query)
    matching: Select[Any] = (
        select(literal_column("1"))
        .select_from(source)
        .where(*_conditions(query), *window.conditions(query))
    )
    counted = 0
    for path in _paths(query):
        bounded = matching.where(*path).limit(exact_up_to + 1).subquery()
        counted += int(conn.scalar(select(func.count()).select_from(bounded)) or 0)
    if counted <= exact_up_to:
        return counted, False
    if conn.dialect.name == "postgresql":
        # Without the predicates repeated for SQLite: the planner would multiply them in.
        plain = _conditions(query, hints=False)
        estimate = _planner_rows(
            conn, select(literal_column("1")).select_from(source).where(*plain)
        )
    else:
        estimate = _sampled_rows(conn, source, query)
    return max(estimate, exact_up_to + 1), True


@dataclass(frozen=True)
class _IdWindow:
    """Ids a page may read: above `above_id` and below `below_id` (None: no such bound).

    One bound each way, never two: SQLite walks the primary key from one `id <` bound and
    only checks another, so `id < window AND id < cursor` read every row between the two."""

    above_id: int | None = None
    below_id: int | None = None

    def narrowed(self, above_id: int | None = None, below_id: int | None = None) -> _IdWindow:
        """This window cut by a cursor's bound: the tighter bound each way, not both."""
        above = [i for i in (self.above_id, above_id) if i is not None]
        below = [i for i in (self.below_id, below_id) if i is not None]
        return _IdWindow(max(above, default=None), min(below, default=None))

    def conditions(self, query: DeliveryQuery) -> list[ColumnElement[bool]]:
        key = _order_key(query)
        found: list[ColumnElement[bool]] = []
        if self.above_id is not None:
            found.append(key > self.above_id)
        if self.below_id is not None:
            found.append(key < self.below_id)
        return found


def _id_window(conn: Connection, query: DeliveryQuery) -> _IdWindow:
    """The ids a time filter's rows can have: without this bound a page `until` a week ago
    walks past every row of the week (no index orders rows by id within a time range), and
    the last page `since` a day walks on to the table's first row.

    Ids are drawn in time order, and a row is stored within `STORED_WITHIN` of its time: so
    every row after the first row stamped later than `until + STORED_WITHIN` is newer than
    `until`, and every row before the last one stamped earlier than `since - STORED_WITHIN`
    is older than `since`. Both rows are found by a search over the primary key."""
    below: int | None = None
    above: int | None = None
    if query.until is not None and (later := _shifted(query.until, STORED_WITHIN)):
        below = _first_id_stamped_after(conn, later)
    if query.since is not None and (earlier := _shifted(query.since, -STORED_WITHIN)):
        above = _last_id_stamped_before(conn, earlier)
    return _IdWindow(above, below)


def _shifted(moment: datetime, by: timedelta) -> datetime | None:
    """`moment + by`, or None past the calendar's ends (a filter at year 9999 has no window)."""
    try:
        return moment + by
    except OverflowError:
        return None


def _first_id_stamped_after(conn: Connection, moment: datetime) -> int | None:
    """The id of a row stamped after `moment` such that the rows before it are stamped at
    or before it, near enough; None when no row is stamped after it."""
    return _crossing(conn, moment, newer=True)


def _last_id_stamped_before(conn: Connection, moment: datetime) -> int | None:
    """`_first_id_stamped_after`'s mirror: a row stamped before `moment`, the rows after it
    stamped at or after it, near enough; None when no row is stamped before it."""
    return _crossing(conn, moment, newer=False)


#: Points of the id range one round trip of the search reads: the range shrinks fifteenfold
#: per round trip (six round trips for ten million rows, where halving takes 24).
_PROBES = 16


def _crossing(conn: Connection, moment: datetime, newer: bool) -> int | None:
    """Where the rows' stamps cross `moment`: walking from the oldest id (`newer`) or from
    the newest, the first row found past it, by a search over the id range that reads a
    few points of what is left of the range per round trip."""
    low, high = _id_range(conn)
    if low is None or high is None:
        return None
    found: int | None = None
    while low <= high:
        span = high - low
        # Always _PROBES points (repeats when the range is short): one statement text, so
        # the server plans it once per connection.
        points = [low + span * k // (_PROBES - 1) for k in range(_PROBES)]
        probed = sorted(
            {row for row in _probe(conn, points, newer) if low <= row[0] <= high},
            reverse=not newer,
        )
        past = [(moment < at) if newer else (at < moment) for _, at in probed]
        if True not in past:  # the crossing lies beyond every row read, or there is no row
            if not probed:
                break
            low, high = (probed[-1][0] + 1, high) if newer else (low, probed[-1][0] - 1)
            continue
        k = past.index(True)
        found = probed[k][0]
        if k == 0:  # the range's first row (its end's, walking down) is past already
            break
        if newer:
            low, high = probed[k - 1][0] + 1, found - 1
        else:
            low, high = found + 1, probed[k - 1][0] - 1
    return found


def _probe(conn: Connection, points: list[int], newer: bool) -> list[tuple[int, datetime]]:
    """For each point the first row at or after it (`newer`), else the last at or before
    it: its id and stamp, all in one statement."""
    params = {f"p{i}": point for i, point in enumerate(points)}
    return [(int(r[0]), r[1]) for r in conn.execute(_probe_statement(newer), params)]


@functools.cache
def _probe_statement(newer: bool) -> CompoundSelect[Any]:
    """Built once: a statement of this many parts costs more to build than to run."""
    parts: list[Select[Any]] = []
    for i in range(_PROBES):
        point = bindparam(f"p{i}", type_=Integer)
        nearest = select(d.c.id, d.c.created_at)
        if newer:
            nearest = nearest.where(d.c.id >= point).order_by(d.c.id)
        else:
            nearest = nearest.where(d.c.id <= point).order_by(d.c.id.desc())
        # A literal limit: a bound one makes the server's reusable plan look costly (any
        # number of rows), so it would plan the statement anew at every execution.
        one = nearest.limit(literal_column("1")).subquery()
        parts.append(select(one.c.id, one.c.created_at))
    return union_all(*parts)


def _id_range(conn: Connection) -> tuple[int | None, int | None]:
    # Two statements: SQLite answers min() or max() alone from the primary key's ends, and
    # both at once by reading every row.
    low, high = conn.scalar(select(func.min(d.c.id))), conn.scalar(select(func.max(d.c.id)))
    return (None, None) if low is None or high is None else (int(low), int(high))


def _needs_event(query: DeliveryQuery) -> bool:
    return query.event_kind is not None or query.tenant is not None


#: On SQLite, a kind or tenant with at least this many events is paged along the primary key.
_SQLITE_COMMON_EVENTS = 2_000


def _walk_ids_on_sqlite(conn: Connection, query: DeliveryQuery) -> bool:
    """Whether an event filter on SQLite should walk deliveries in id order (the filter is
    common: a page is found among the next few rows) rather than take its events by index
    and sort their deliveries (a rare one). SQLite keeps no statistics per value to choose
    by, so this asks the index how many events there are, up to a bound; PostgreSQL's planner
    chooses by its own statistics."""
    if conn.dialect.name != "sqlite" or not _needs_event(query):
        return False
    matching: Select[Any] = (
        select(literal_column("1")).select_from(events).where(*_event_conditions(query))
    )
    bounded = matching.limit(_SQLITE_COMMON_EVENTS).subquery()
    return int(conn.scalar(select(func.count()).select_from(bounded)) or 0) >= _SQLITE_COMMON_EVENTS


class _Explain(Executable, ClauseElement):
    """`EXPLAIN (FORMAT JSON)` of a statement, its parameters bound as usual."""

    inherit_cache = False

    def __init__(self, statement: Select[Any]) -> None:
        self.statement = statement


@compiles(_Explain)
def _compile_explain(element: _Explain, compiler: SQLCompiler, **kw: Any) -> str:
    return "EXPLAIN (FORMAT JSON) " + compiler.process(element.statement, **kw)


def _planner_rows(conn: Connection, statement: Select[Any]) -> int:
    plan = conn.scalar(_Explain(statement))
    doc = json.loads(plan) if isinstance(plan, str | bytes) else plan
    return int(doc[0]["Plan"]["Plan Rows"])


def _sampled_rows(conn: Connection, source: Any, query: DeliveryQuery) -> int:
    """The id range's length, times the share of matches in a few slices of it."""
    low, high = _id_range(conn)
    if low is None or high is None:
        return 0
    span = high - low + 1
    conditions = _conditions(query, walk_ids=True)
    if not conditions or span <= _SQLITE_SAMPLE:
        return span
    width = _SQLITE_SAMPLE // _SQLITE_SLICES
    starts = [int(low) + span * (2 * k + 1) // (2 * _SQLITE_SLICES) for k in range(_SQLITE_SLICES)]
    sampled = 0
    for start in starts:  # ranges of the primary key, each read in its order
        within = d.c.id.between(start, start + width - 1)
        stmt = select(func.count()).select_from(source).where(within, *conditions)
        sampled += int(conn.scalar(stmt) or 0)
    return round(span * sampled / (width * _SQLITE_SLICES))


def _event_conditions(query: DeliveryQuery, unindexed: bool = False) -> list[ColumnElement[bool]]:
    """The filters on the event; `unindexed` writes them so SQLite uses no index for them
    (a unary plus on the column) and walks the primary key instead."""
    kind: ColumnElement[str] = events.c.kind
    tenant: ColumnElement[str] = events.c.tenant
    if unindexed:
        kind = literal_column("+events.kind", String)
        tenant = literal_column("+events.tenant", String)
    found: list[ColumnElement[bool]] = []
    if query.event_kind is not None:
        found.append(kind == query.event_kind)
    if query.tenant is not None:
        found.append(tenant == query.tenant)
    return found


def _conditions(
    query: DeliveryQuery, walk_ids: bool = False, hints: bool = True
) -> list[ColumnElement[bool]]:
    found: list[ColumnElement[bool]] = _event_conditions(query, unindexed=walk_ids)
    if query.channel_id is not None:
        found.append(d.c.channel_id == query.channel_id)
    if query.state is not None:
        # A literal, so the planner can match a partial index whose predicate names states,
        # and that predicate itself, which SQLite needs to see word for word.
        found.append(d.c.state == literal_column(f"'{query.state.value}'"))
        if hints:
            found.extend(_index_predicate(query.state))
    created: ColumnElement[datetime] = d.c.created_at
    if walk_ids:
        created = literal_column("+deliveries.created_at", UTCDateTime)
    if query.since is not None:
        found.append(created >= query.since)
    if query.until is not None:
        found.append(created <= query.until)
    return found


def _index_predicate(state: State) -> list[ColumnElement[bool]]:
    """The predicate of the partial index holding `state`'s rows (none for sent ones)."""
    if state in CLAIMABLE:
        return [is_live()]
    return [] if state == State.SENT else [is_ended_not_sent()]


def get_delivery(conn: Connection, delivery_id: int) -> DeliveryDetail:
    row = (
        conn.execute(select(*rows.VIEW_COLUMNS).select_from(_JOINED).where(d.c.id == delivery_id))
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound("delivery", delivery_id)
    log = conn.execute(
        select(attempts).where(attempts.c.delivery_id == delivery_id).order_by(attempts.c.id)
    ).mappings()
    escalated = conn.scalars(
        select(d.c.id).where(d.c.fallback_of == delivery_id).order_by(d.c.id)
    ).all()
    return DeliveryDetail(
        view=rows.delivery_view(row),
        attempts_log=[rows.attempt(r) for r in log],
        escalated_to=list(escalated),
    )


def get_event(conn: Connection, event_id: int) -> PublishResult:
    """The event and its deliveries (`created` is always False: this is a read)."""
    row = conn.execute(select(events).where(events.c.id == event_id)).mappings().first()
    if row is None:
        raise NotFound("event", event_id)
    found = conn.execute(select(d).where(d.c.event_id == event_id).order_by(d.c.id)).mappings()
    return PublishResult(
        event=rows.event(row), deliveries=[rows.delivery(r) for r in found], created=False
    )
