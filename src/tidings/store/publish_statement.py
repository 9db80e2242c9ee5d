"""PostgreSQL: a publish's events, their deliveries and the wake-up in one statement.

Run without BEGIN and COMMIT it is one round trip where the transaction took six (BEGIN,
events, keyed events, deliveries, NOTIFY, COMMIT), and still all or nothing: a statement is
atomic. The events' ids are drawn from their sequence first, in the order given, so each
delivery names its event by position and the deliveries of an event whose key was already
stored are left out by the join with the rows actually inserted.
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection

from tidings.core import jsontext
from tidings.core.model import EventInput, Severity
from tidings.core.states import State
from tidings.store import handoff as handoff_sql
from tidings.store.notify import NOTIFY_CHANNEL

#: The columns of a new event given to the statement, as text arrays.
EVENT_COLUMNS = (
    "kind",
    "subject",
    "severity",
    "title",
    "body",
    "url",
    "labels",
    "data",
    "tenant",
    "idempotency_key",
    "traceparent",
)
_JSON_COLUMNS = frozenset({"labels", "data"})


@dataclass(frozen=True)
class NewDeliveries:
    """The deliveries to insert, a list per column with an entry per row: a thousand rows
    cost five lists rather than a thousand objects taken apart again."""

    #: The position of each one's event among the statement's events, from 0.
    event_n: list[int]
    channel_id: list[int]
    message_id: list[str]
    state: list[str]
    skip_reason: list[str | None]


@dataclass(frozen=True)
class Stored:
    #: Per event given, in order: its id, or None where its key was already stored.
    event_ids: list[int | None]
    #: The events' (and their deliveries') time; None when no event was stored.
    created_at: datetime | None
    #: (event id, channel id) -> the delivery's id.
    delivery_ids: dict[tuple[int, int], int]
    #: The channels' version the statement saw when it was given one, else None.
    channels_version: int | None = None
    #: The deliveries leased to a waiting dispatcher (`tidings.store.handoff`).
    handed: frozenset[int] = frozenset()


def publish(
    conn: Connection,
    new_events: Sequence[EventInput],
    new_deliveries: NewDeliveries,
    *,
    now: datetime | None,
    notify: str | None,
    channels_version: int | None = None,
) -> Stored:
    """Insert `new_events` (an event whose key is stored already is skipped, E2) and the
    deliveries of those inserted. `now`: the time to stamp, or None for the database's
    `now()`; `notify`: the wake-up's payload, or None for none; `channels_version`: the
    version of the channels the deliveries were planned from (`channels_version`), when
    read before: the statement stores nothing, and says so, when it has moved since."""
    statement, params = prepared(
        new_events, new_deliveries, now=now, notify=notify, channels_version=channels_version
    )
    return stored_from(conn.execute(statement, params).one())


def prepared(
    new_events: Sequence[EventInput],
    new_deliveries: NewDeliveries,
    *,
    now: datetime | None,
    notify: str | None,
    channels_version: int | None = None,
    handoff: bool = False,
) -> tuple[TextClause, dict[str, Any]]:
    """`publish`'s statement and its parameters, for whichever connection sends it.
    `handoff`: the statement may lease its rows to a waiting dispatcher
    (`tidings.store.handoff`) — only for a statement that commits on its own, so that the
    lease starts when the dispatcher hears of it; it does where it can."""
    single = len(new_events) == 1
    handoff = (
        handoff
        and single
        and now is None
        and notify is not None
        and channels_version is not None
        and len(new_deliveries.channel_id) <= handoff_sql.MAX_HANDED
    )
    params: dict[str, Any] = (
        _one_event_columns(new_events[0]) if single else event_columns(new_events)
    ) | {
        "d_event": _joined_numbers(new_deliveries.event_n),
        "d_channel": _joined_numbers(new_deliveries.channel_id),
    }
    text_columns: dict[str, Sequence[str | None]] = {
        "d_message": new_deliveries.message_id,
        "d_state": new_deliveries.state,
        "d_skip": new_deliveries.skip_reason,
    }
    for name, values in text_columns.items():
        params |= on_the_wire(name, values)
    if now is not None:
        params["now"] = now
    if notify is not None:
        params |= {"channel": NOTIFY_CHANNEL, "hint": notify}
    guarded = channels_version is not None
    if guarded:
        params["version"] = channels_version
    keyed = any(item.idempotency_key is not None for item in new_events)
    if handoff:
        params["token"] = os.urandom(16).hex()  # each row's: this, a dash and its channel
    statement = _statement(now is not None, notify is not None, guarded, keyed, single, handoff)
    return statement, params


#: A version of the channels no database holds (they count up from 0): a statement planned
#: for it stores nothing and wakes no one.
NO_VERSION = -1


def warming() -> tuple[TextClause, dict[str, Any]]:
    """The statement of a single publish (one unkeyed event, with a wake-up, guarded by the
    channels' version, which may hand off), given no delivery and planned for `NO_VERSION`:
    it runs as a publish does and changes nothing (its guard stores no event, and wakes no
    one)."""
    nothing = NewDeliveries(event_n=[], channel_id=[], message_id=[], state=[], skip_reason=[])
    event = EventInput(kind="tidings.warming", subject="")
    return prepared(
        [event], nothing, now=None, notify="", channels_version=NO_VERSION, handoff=True
    )


def stored_from(row: Sequence[Any]) -> Stored:
    """What the statement's one row says was stored."""
    given, stored, created_at, ids, event_ids, channel_ids, seen = row[:7]
    inserted = set(stored)
    return Stored(
        event_ids=[i if i in inserted else None for i in given],
        created_at=created_at,
        delivery_ids={(e, c): d for d, e, c in zip(ids, event_ids, channel_ids, strict=True)},
        channels_version=seen,
        handed=frozenset(row[8]) if len(row) > 8 and row[8] else frozenset(),
    )


def event_columns(items: Sequence[EventInput]) -> dict[str, Any]:
    """The events as the statement's parameters, a column of EVENT_COLUMNS each as
    `on_the_wire` sends it; JSON documents travel as text (cast back by the server), as in
    `insert_rows`."""
    params: dict[str, Any] = {}
    for name in EVENT_COLUMNS:
        values = list(map(operator.attrgetter(name), items))
        as_text = _AS_TEXT.get(name)
        params |= on_the_wire(name, values if as_text is None else list(map(as_text, values)))
    return params


def _one_event_columns(item: EventInput) -> dict[str, Any]:
    """One event's columns as a value each, for the statement's form for one event: the
    single publish of an idle producer, where every microsecond is on its latency."""
    params: dict[str, Any] = {}
    for name in EVENT_COLUMNS:
        value = getattr(item, name)
        as_text = _AS_TEXT.get(name)
        params[name] = value if as_text is None or value is None else as_text(value)
    return params


def _joined_numbers(values: Sequence[int]) -> str:
    """Integers as one text the server splits (`_number_column`): as for text, an array
    costs the driver abstract-base-class checks, for the list and for each element."""
    return ",".join(map(str, values))


#: Joins a text column's values into one string that the server splits (`string_to_array`).
#: An array of a thousand strings costs asyncpg ~0.3 µs an element to check and encode (two
#: abstract-base-class checks each), and the server as much to take apart; one joined string
#: is a pass in C on either side. The unit separator, which validated text may still hold:
#: a column that does goes as an array.
SEPARATOR = "\x1f"
_SEPARATOR_SQL = f"E'\\x{ord(SEPARATOR):02x}'"  # the same character as an SQL literal


def on_the_wire(name: str, values: Sequence[str | None]) -> dict[str, Any]:
    """A text column as two parameters, `name` (an array) and `name_joined` (SEPARATOR
    before each value), one of them None; `_text_column` reads whichever is given. All
    NULL, both are None: `unnest` pads a missing array with NULLs."""
    joined: str | None = None
    if None not in values:
        # No None among them (checked above); `typing.cast` would be a call on every publish.
        joined = SEPARATOR + SEPARATOR.join(values)  # type: ignore[arg-type]
        if joined.count(SEPARATOR) != len(values):  # a value holds the separator itself
            joined = None
    elif values.count(None) == len(values):
        values = []
    array = None if joined is not None or not values else values
    return {name: array, f"{name}_joined": joined}


def _text_column(name: str) -> str:
    """The SQL of a column `on_the_wire` sent: its array, else its joined values split (the
    first piece is the empty text before the first separator)."""
    split = f"(string_to_array(CAST(:{name}_joined AS text), {_SEPARATOR_SQL}))[2:]"
    return f"COALESCE(CAST(:{name} AS text[]), {split})"


def _json_text(document: Any) -> str:
    if type(document) is dict and not document:
        return "{}"  # most events' labels, without the encoder's call
    return jsontext.dumps(document).decode()


#: How a column's value becomes the text its array carries, where it is not text already.
_AS_TEXT: dict[str, Callable[[Any], Any]] = {
    "severity": {severity: severity.value for severity in Severity}.__getitem__,
    "labels": _json_text,
    "data": _json_text,
}


#: The events' id sequence, as the first migration's serial column named it.
EVENTS_ID_SEQUENCE = "events_id_seq"


def _number_column(name: str) -> str:
    """The SQL of a column of integers `_joined_numbers` sent."""
    return f"CAST(string_to_array(CAST(:{name} AS text), ',') AS bigint[])"


@functools.cache
def _statement(
    fixed_time: bool,
    notify: bool,
    guarded: bool,
    keyed: bool,
    single: bool = False,
    handoff: bool = False,
) -> TextClause:
    """The statement; `keyed` when an event given has an idempotency key. Without one no
    event can conflict, so every event given is stored: the events go in without ON
    CONFLICT's per-row check or the key order, and each delivery finds its event's id by
    position in the ids drawn, where it otherwise joins the rows actually stored. `single`:
    one event, its columns given as a value each rather than as arrays to unnest.
    `handoff` (a single event, a wake-up, guarded): its pending rows of channels the
    express claim serves are leased to a taken seat, if any, and the wake-up says so."""
    now = "CAST(:now AS timestamptz)" if fixed_time else "now()"
    # Guarded: nothing goes in (and no one is woken) unless the channels are as planned.
    # The version is read once (a CTE) however often the statement asks for it.
    version = "(SELECT version FROM seen)"
    unchanged = f"CAST(:version AS bigint) = {version}" if guarded else "true"
    hint = f":hint || {handoff_sql.payload_sql()}" if handoff else ":hint"
    wake = f"CASE WHEN {unchanged} THEN pg_notify(:channel, {hint}) END" if notify else "NULL"
    columns = ", ".join(EVENT_COLUMNS)
    values = ", ".join(
        f"CAST({name} AS jsonb)" if name in _JSON_COLUMNS else name for name in EVENT_COLUMNS
    )
    if single:
        scalars = ", ".join(f"CAST(:{name} AS text) AS {name}" for name in EVENT_COLUMNS)
        rows = f"SELECT {scalars}, CAST(1 AS bigint) AS n"
    else:
        arrays = ", ".join(_text_column(name) for name in EVENT_COLUMNS)
        rows = f"SELECT * FROM unnest({arrays}) WITH ORDINALITY AS u({columns}, n) ORDER BY n"
    given = f"""
    -- the sequence named as a constant, resolved when the statement is planned: neither
    -- looked up by its table's name at each publish nor parsed again for every row
    SELECT nextval(CAST('{EVENTS_ID_SEQUENCE}' AS regclass)) AS id,
        r.*
    FROM ({rows}) AS r
    WHERE {unchanged}
"""
    planned = """unnest(
        {event_n}, {channel_id}, {message}, {state}, {skip}
    ) WITH ORDINALITY AS d(event_n, channel_id, message_id, state, skip_reason, n)""".format(
        event_n=_number_column("d_event"),
        channel_id=_number_column("d_channel"),
        message=_text_column("d_message"),
        state=_text_column("d_state"),
        skip=_text_column("d_skip"),
    )

    def leased_columns(at: str) -> str:
        """state, skip_reason, created_at, next_attempt_at, attempts (and the lease's token
        and owner when handing off): a handed row as a claim leaves it (C1)."""
        if not handoff:
            return f"d.state, d.skip_reason, {at}, {at}, 0"
        handed = "h.seat IS NOT NULL"
        return f"""CASE WHEN {handed} THEN '{State.SENDING.value}' ELSE d.state END,
        d.skip_reason, {at},
        CASE WHEN {handed} THEN {at} + h.lease_s * interval '1 second' ELSE {at} END,
        CASE WHEN {handed} THEN 1 ELSE 0 END,
        CASE WHEN {handed} THEN CAST(:token AS text) || '-' || d.channel_id END,
        h.owner"""

    pending = f"'{State.PENDING.value}'"
    handed_join = (
        f"LEFT JOIN handed AS h ON h.channel_id = d.channel_id AND d.state = {pending}"
        if handoff
        else ""
    )
    lease_columns = ", lease_token, lease_owner" if handoff else ""
    returned = ", message_id, lease_token" if handoff else ""
    if keyed:
        # Keys in one order, so concurrent publishes of the same keys wait, not deadlock;
        # an event whose key was stored before drops its deliveries out of the join.
        insert_events = (
            "ORDER BY idempotency_key NULLS FIRST, n ON CONFLICT (idempotency_key) DO NOTHING"
        )
        new_deliveries = f"""
    SELECT d.message_id, stored.id, d.channel_id, {leased_columns("stored.created_at")}
    FROM {planned}
    JOIN given ON given.n = d.event_n + 1  -- ORDINALITY counts from 1
    JOIN stored ON stored.id = given.id
    {handed_join}"""
    else:
        insert_events = ""
        event_id = (
            "(SELECT id FROM given)"
            if single
            else "(ARRAY(SELECT id FROM given ORDER BY n))[d.event_n + 1]"
        )
        new_deliveries = f"""
    SELECT d.message_id, {event_id}, d.channel_id, {leased_columns(now)}
    FROM {planned}
    {handed_join}
    WHERE {unchanged}"""
    seen = (
        "seen AS MATERIALIZED (SELECT version FROM channels_version WHERE id = 1),"
        if guarded
        else ""
    )
    handed_ids = (
        ",\n    ARRAY(SELECT id FROM fanned WHERE lease_token IS NOT NULL)" if handoff else ""
    )
    handing = (
        ",\n".join(
            (
                handoff_sql.doc_cte(now, EVENT_COLUMNS, _JSON_COLUMNS),
                handoff_sql.seat_cte(),
                handoff_sql.servable_cte(_number_column("d_channel")),
                handoff_sql.handed_cte(),
            )
        )
        + ","
        if handoff
        else ""
    )
    return text(
        f"""
WITH {seen}
given AS MATERIALIZED ({given}),
{handing}
stored AS (
    INSERT INTO events (id, {columns}, created_at)
    SELECT id, {values}, {now} FROM given
    {insert_events}
    RETURNING id, created_at
),
fanned AS (
    INSERT INTO deliveries
        (message_id, event_id, channel_id, state, skip_reason, created_at, next_attempt_at,
         attempts{lease_columns})
    {new_deliveries}
    ORDER BY d.n
    RETURNING id, event_id, channel_id{returned}
)
SELECT
    ARRAY(SELECT id FROM given ORDER BY n),
    ARRAY(SELECT id FROM stored),
    (SELECT max(created_at) FROM stored),
    ARRAY(SELECT id FROM fanned),
    ARRAY(SELECT event_id FROM fanned),
    ARRAY(SELECT channel_id FROM fanned),
    {version if guarded else "NULL"},
    {wake}{handed_ids}
"""
    )
