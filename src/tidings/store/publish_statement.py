"""PostgreSQL: a publish's events, their deliveries and the wake-up in one statement.

Run without BEGIN and COMMIT it is one round trip where the transaction took six (BEGIN,
events, keyed events, deliveries, NOTIFY, COMMIT), and still all or nothing: a statement is
atomic. The events' ids are drawn from their sequence first, in the order given, so each
delivery names its event by position and the deliveries of an event whose key was already
stored are left out by the join with the rows actually inserted.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection

from tidings.core import jsontext
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
class NewDelivery:
    #: The position of its event among the statement's events, from 0.
    event_n: int
    channel_id: int
    message_id: str
    state: str
    skip_reason: str | None


@dataclass(frozen=True)
class Stored:
    #: Per event given, in order: its id, or None where its key was already stored.
    event_ids: list[int | None]
    #: The events' (and their deliveries') time; None when no event was stored.
    created_at: datetime | None
    #: (event id, channel id) -> the delivery's id.
    delivery_ids: dict[tuple[int, int], int]


def publish(
    conn: Connection,
    new_events: Sequence[dict[str, Any]],
    new_deliveries: Sequence[NewDelivery],
    *,
    now: datetime | None,
    notify: str | None,
) -> Stored:
    """Insert `new_events` (an event whose key is stored already is skipped, E2) and the
    deliveries of those inserted. `now`: the time to stamp, or None for the database's
    `now()`; `notify`: the wake-up's payload, or None for none."""
    params: dict[str, Any] = {
        name: [_text(name, e[name]) for e in new_events] for name in EVENT_COLUMNS
    }
    params |= {
        "d_event": [d.event_n for d in new_deliveries],
        "d_channel": [d.channel_id for d in new_deliveries],
        "d_message": [d.message_id for d in new_deliveries],
        "d_state": [d.state for d in new_deliveries],
        "d_skip": [d.skip_reason for d in new_deliveries],
    }
    if now is not None:
        params["now"] = now
    if notify is not None:
        params |= {"channel": NOTIFY_CHANNEL, "hint": notify}
    row = conn.execute(_statement(now is not None, notify is not None), params).one()
    given, stored, created_at, ids, event_ids, channel_ids = row[:6]
    inserted = set(stored)
    return Stored(
        event_ids=[i if i in inserted else None for i in given],
        created_at=created_at,
        delivery_ids={(e, c): d for d, e, c in zip(ids, event_ids, channel_ids, strict=True)},
    )


def _text(name: str, value: Any) -> Any:
    """JSON documents travel as text (cast back by the server), as in `insert_rows`."""
    if name in _JSON_COLUMNS:
        return jsontext.dumps(value).decode()
    return value


@functools.cache
def _statement(fixed_time: bool, notify: bool) -> TextClause:
    now = "CAST(:now AS timestamptz)" if fixed_time else "now()"
    wake = "pg_notify(:channel, :hint)" if notify else "NULL"
    arrays = ", ".join(f"CAST(:{name} AS text[])" for name in EVENT_COLUMNS)
    columns = ", ".join(EVENT_COLUMNS)
    values = ", ".join(
        f"CAST({name} AS jsonb)" if name in _JSON_COLUMNS else name for name in EVENT_COLUMNS
    )
    return text(
        f"""
WITH given AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('events', 'id')) AS id, r.*
    FROM (
        SELECT * FROM unnest({arrays}) WITH ORDINALITY AS u({columns}, n) ORDER BY n
    ) AS r
),
stored AS (
    INSERT INTO events (id, {columns}, created_at)
    SELECT id, {values}, {now} FROM given
    -- keys in one order, so concurrent publishes of the same keys wait rather than deadlock
    ORDER BY idempotency_key NULLS FIRST, n
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, created_at
),
fanned AS (
    INSERT INTO deliveries
        (message_id, event_id, channel_id, state, attempts, skip_reason, created_at,
         next_attempt_at)
    SELECT d.message_id, stored.id, d.channel_id, d.state, 0, d.skip_reason,
        stored.created_at, stored.created_at
    FROM unnest(
        CAST(:d_event AS bigint[]), CAST(:d_channel AS bigint[]), CAST(:d_message AS text[]),
        CAST(:d_state AS text[]), CAST(:d_skip AS text[])
    ) WITH ORDINALITY AS d(event_n, channel_id, message_id, state, skip_reason, n)
    JOIN given ON given.n = d.event_n + 1  -- ORDINALITY counts from 1
    JOIN stored ON stored.id = given.id
    ORDER BY d.n
    RETURNING id, event_id, channel_id
)
SELECT
    ARRAY(SELECT id FROM given ORDER BY n),
    ARRAY(SELECT id FROM stored),
    (SELECT max(created_at) FROM stored),
    ARRAY(SELECT id FROM fanned),
    ARRAY(SELECT event_id FROM fanned),
    ARRAY(SELECT channel_id FROM fanned),
    {wake}
"""
    )
