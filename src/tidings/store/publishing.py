"""Publishing (E1–E3): store the event and fan it out to matching channels in one transaction."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, RowMapping, Table, literal, select, true
from sqlalchemy.engine import Connection

from tidings.core import message_id
from tidings.core.fanout import Fanout, Initial, Route
from tidings.core.filters import Routed
from tidings.core.model import Channel, Delivery, Event, EventInput, PublishResult
from tidings.core.states import State
from tidings.store import publish_statement, rows
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.direct import Direct
from tidings.store.notify import encode_hint
from tidings.store.schema import UTCDateTime, channels, channels_version, deliveries, events

RETURNED = [events.c.id, events.c.created_at]


def publish_events(
    conn: Connection,
    clock: TxClock,
    inputs: Sequence[EventInput],
    among: Collection[int] | None = None,
    known: KnownChannels | None = None,
) -> list[PublishResult]:
    """Store the events and their deliveries; a key already stored answers with its event.
    `among`: only these channels may receive them (operational events, H2); `known`: the
    channels this process read before, used while they are unchanged.

    Events go in as one multi-row insert per kind (with and without a key), so a batch of a
    thousand costs a handful of statements rather than two thousand. Only ids come back: the
    rows are built from what was sent, which is what a thousand-event batch spends least on.
    """
    if dialect_for(conn).publish_in_one_statement:
        return _in_one_statement(conn, clock, inputs, among, known)
    if known is not None and among is None:
        fanout = known.fanout(known.current(conn))
    else:
        fanout = Fanout(_channels(conn, among))
    stamp = {"created_at": clock.at()}
    unkeyed = [i for i, item in enumerate(inputs) if item.idempotency_key is None]
    found: dict[int, Event] = {}
    if unkeyed:
        values = [_values(inputs[i]) for i in unkeyed]
        created = insert_rows(conn, events, values, RETURNED, constants=stamp)
        for i, (event_id, created_at) in zip(unkeyed, created, strict=True):
            found[i] = _event(event_id, inputs[i], created_at)
    keyed = _insert_keyed(conn, inputs, stamp)
    new_events = list(found.values()) + [event for event, _ in keyed.values() if event]
    fanned = _fan_out(conn, new_events, fanout)
    pending = {d.channel_id for ds in fanned.values() for d in ds if d.state is State.PENDING}
    if pending:
        dialect_for(conn).announce(conn, pending)
    results: list[PublishResult] = []
    for i, item in enumerate(inputs):
        if i in found:
            results.append(PublishResult(found[i], fanned.get(found[i].id, []), created=True))
            continue
        key = item.idempotency_key or ""
        event, first_index = keyed[key]
        if event is not None and first_index == i:
            results.append(PublishResult(event, fanned.get(event.id, []), created=True))
        else:  # E2: the key names one logical event; answer with the first
            results.append(key_first_event(conn, key))
    return results


def _in_one_statement(
    conn: Connection,
    clock: TxClock,
    inputs: Sequence[EventInput],
    among: Collection[int] | None,
    known: KnownChannels | None,
) -> list[PublishResult]:
    """PostgreSQL: planned from the known channels, the statement checking they are still
    the same; after STALE_TRIES changed under it (or with `among`), from channels read now."""
    if known is not None and among is None:
        for _ in range(STALE_TRIES):
            seen = known.seen or known.read(conn)
            if seen is None:
                break
            done = _publish_at_once(conn, clock, inputs, known.fanout(seen[1]), seen[0])
            if done is not None:
                return done
            known.forget()  # the channels changed since they were read
    at_once = _publish_at_once(conn, clock, inputs, Fanout(_channels(conn, among)), None)
    assert at_once is not None  # an unguarded statement always goes in
    return at_once


def _channels(conn: Connection, among: Collection[int] | None) -> list[Channel]:
    # Without their secrets: the fan-out reads filters and tenants only, and a process that
    # only publishes needs no secret key.
    all_channels = [rows.channel(r) for r in conn.execute(select(channels)).mappings()]
    if among is not None:
        all_channels = [c for c in all_channels if c.id in among]
    return all_channels


#: The columns of a channel a `Route` holds, in its fields' order.
ROUTING = (channels.c.id, channels.c.enabled, channels.c.tenant, channels.c.filter)

#: Publishes planned from known channels that found them changed, before one reads them.
STALE_TRIES = 3


class KnownChannels:
    """The channels a process read for its publishes, with their version (migration 0018):
    a publish plans its fan-out from them and its statement stores it only if the version
    is still the same, so the channels are read again only after they changed rather than
    before every publish."""

    def __init__(self) -> None:
        #: (version, channels), read in one statement; None until read or after a change.
        self.seen: tuple[int, list[Route]] | None = None
        self._fanout: Fanout | None = None

    def fanout(self, channels: Sequence[Routed]) -> Fanout:
        """The fan-out of `channels` (those it last answered, while they are the same), built
        once for them rather than at every publish."""
        if self._fanout is None or self._fanout.channels is not channels:
            self._fanout = Fanout(channels)
        return self._fanout

    def read(self, conn: Connection) -> tuple[int, list[Route]] | None:
        """The channels and their version, or None where the version row is missing (a
        publish then reads the channels itself). Only what routes an event is read."""
        found = conn.execute(
            select(channels_version.c.version, *ROUTING)
            .select_from(channels_version.outerjoin(channels, true()))
            .where(channels_version.c.id == 1)
        )
        version: int | None = None
        read: list[Route] = []
        for row in found:
            version = row[0]
            if row[1] is not None:  # the outer join's row when there is no channel
                read.append(Route(row[1], bool(row[2]), row[3], dict(row[4])))
        self.seen = None if version is None else (version, read)
        return self.seen

    def forget(self) -> None:
        self.seen = None

    def current(self, conn: Connection) -> Sequence[Routed]:
        """The channels as this transaction sees them: those known while their version is
        the same (one row read rather than every channel), else read again."""
        seen = self.seen
        version = conn.scalar(select(channels_version.c.version).where(channels_version.c.id == 1))
        if seen is not None and seen[0] == version:
            return seen[1]
        seen = self.read(conn)
        return _channels(conn, None) if seen is None else seen[1]


def _publish_at_once(
    conn: Connection,
    clock: TxClock,
    inputs: Sequence[EventInput],
    fanout: Fanout,
    version: int | None,
) -> list[PublishResult] | None:
    """The events (each key's first), their deliveries and the wake-up in one statement
    (`publish_statement`); fanned out before their ids are known, which matching needs not.
    Planned from channels read at `version`: None, storing nothing, when they changed since."""
    plan = _Plan(inputs, fanout, None if clock.unread else clock.now(), version)
    stored = publish_statement.stored_from(conn.execute(plan.statement, plan.params).one())
    if stored.channels_version != version:
        return None
    found = {key: key_first_event(conn, key) for key in plan.keys_to_read(stored)}
    return plan.results(stored, found)


async def publish_direct(
    direct: Direct, inputs: Sequence[EventInput], known: KnownChannels, existing: Existing
) -> list[PublishResult] | None:
    """`_publish_at_once` on the store's own driver connection (`tidings.store.direct`),
    planned from the channels this process knows, at the database's time; None, storing
    nothing, when none are known yet or they changed since (the caller then publishes
    through the engine, which reads them). `existing` reads the events of keys that were
    stored before (E2)."""
    seen = known.seen
    if seen is None:
        return None
    version, all_channels = seen
    plan = _Plan(inputs, known.fanout(all_channels), None, version, handoff=True)
    (row,) = await direct.fetch(plan.statement, plan.params)
    stored = publish_statement.stored_from(row)
    if stored.channels_version != version:
        known.forget()
        return None
    keys = plan.keys_to_read(stored)
    return plan.results(stored, await existing(keys) if keys else {})


async def warm_direct(direct: Direct) -> None:
    """Send a single publish's statement once, storing nothing (`publish_statement.warming`)."""
    await direct.fetch(*publish_statement.warming())


#: Reads the first events of idempotency keys stored before, with their deliveries.
Existing = Callable[[list[str]], Awaitable[Mapping[str, PublishResult]]]


class _Plan:
    """A publish planned from the channels' `fanout` before its statement runs: which
    inputs go in (each key's first, every unkeyed one), each one's deliveries, the statement
    and its parameters; and, once the statement answered, each input's result."""

    def __init__(
        self,
        inputs: Sequence[EventInput],
        fanout: Fanout,
        now: datetime | None,
        version: int | None,
        *,
        handoff: bool = False,
    ) -> None:
        """`handoff`: the statement commits on its own, and may lease its rows to a waiting
        dispatcher (`publish_statement.prepared`)."""
        self.inputs = inputs
        new: list[int] = []
        keys_seen: set[str] = set()
        for i, item in enumerate(inputs):
            key = item.idempotency_key
            if key is None or key not in keys_seen:
                new.append(i)
                if key is not None:
                    keys_seen.add(key)
        self.new = new
        self.initial = fanout.initial
        # One pass builds every column (a comprehension each was a call each, on every
        # single publish's path): each row's event and channel, and its state and skip
        # reason as the text the statement stores.
        self.pairs: list[tuple[int, Routed]] = []
        event_n: list[int] = []
        channel_id: list[int] = []
        state: list[str] = []
        skip_reason: list[str | None] = []
        pending: set[int] = set()
        for n, i in enumerate(new):
            for channel in fanout.channels_for(inputs[i]):
                self.pairs.append((n, channel))
                event_n.append(n)
                channel_id.append(channel.id)
                as_text, skip = fanout.initial_text[channel.id]
                state.append(as_text)
                skip_reason.append(skip)
                if self.initial[channel.id][0] is State.PENDING:
                    pending.add(channel.id)
        self.message_ids = new_message_ids(len(self.pairs))
        planned = publish_statement.NewDeliveries(
            event_n=event_n,
            channel_id=channel_id,
            message_id=self.message_ids,
            state=state,
            skip_reason=skip_reason,
        )
        self.statement, self.params = publish_statement.prepared(
            inputs if len(new) == len(inputs) else [inputs[i] for i in new],
            planned,
            now=now,
            notify=encode_hint(pending) if pending else None,
            channels_version=version,
            handoff=handoff,
        )

    def keys_to_read(self, stored: publish_statement.Stored) -> list[str]:
        """The keys of the inputs not stored now (a key stored before, or given twice): each
        answers with its key's first event, read after the statement (E2)."""
        created = {
            i
            for i, event_id in zip(self.new, stored.event_ids, strict=True)
            if event_id is not None
        }
        return sorted(
            {item.idempotency_key or "" for i, item in enumerate(self.inputs) if i not in created}
        )

    def results(
        self, stored: publish_statement.Stored, existing: Mapping[str, PublishResult]
    ) -> list[PublishResult]:
        at = stored.created_at
        created: dict[int, Event] = {}  # by the input's index
        for i, event_id in zip(self.new, stored.event_ids, strict=True):
            if event_id is not None and at is not None:
                created[i] = _event(event_id, self.inputs[i], at)
        fanned: dict[int, list[Delivery]] = {i: [] for i in created}
        ids = stored.delivery_ids
        handed = stored.handed
        for (n, channel), key in zip(self.pairs, self.message_ids, strict=True):
            event = created.get(self.new[n])
            if event is not None:
                delivery_id = ids[(event.id, channel.id)]
                initial = _HANDED if delivery_id in handed else self.initial[channel.id]
                delivery = _delivery(delivery_id, event, channel, initial, key)
                fanned[self.new[n]].append(delivery)
        return [
            PublishResult(created[i], fanned[i], True)
            if i in created
            else existing[item.idempotency_key or ""]  # E2: the key's first event
            for i, item in enumerate(self.inputs)
        ]


def _insert_keyed(
    conn: Connection, inputs: Sequence[EventInput], stamp: Mapping[str, ColumnElement[datetime]]
) -> dict[str, tuple[Event | None, int]]:
    """Insert keyed events, ignoring keys already stored; key -> (new event or None, index)."""
    first: dict[str, int] = {}
    for i, item in enumerate(inputs):
        if item.idempotency_key is not None:
            first.setdefault(item.idempotency_key, i)
    if not first:
        return {}
    # In key order: concurrent transactions then take the keys' locks in one order, so two
    # publishes of the same keys wait for each other instead of deadlocking.
    values = [_values(inputs[first[key]]) for key in sorted(first)]
    inserted = insert_rows(
        conn,
        events,
        values,
        [*RETURNED, events.c.idempotency_key],
        constants=stamp,
        skip_conflicts_on="idempotency_key",
    )
    new = {
        key: _event(event_id, inputs[first[key]], created_at)
        for event_id, created_at, key in inserted
    }
    return {key: (new.get(key), index) for key, index in first.items()}


def _values(item: EventInput) -> dict[str, object]:
    return {
        "kind": item.kind,
        "subject": item.subject,
        "severity": item.severity.value,
        "title": item.title,
        "body": item.body,
        "url": item.url,
        "labels": item.labels,
        "data": item.data,
        "tenant": item.tenant,
        "idempotency_key": item.idempotency_key,
        "traceparent": item.traceparent,
    }


def _event(event_id: int, item: EventInput, created_at: datetime) -> Event:
    # Positional, in Event's field order: matching thirteen keywords costs a large batch
    # ~0.4 ms (measured); the publish tests compare every field with the row read back.
    return Event(
        event_id,
        item.kind,
        item.subject,
        item.severity,
        item.title,
        item.body,
        item.url,
        dict(item.labels),
        dict(item.data),
        item.tenant,
        item.idempotency_key,
        created_at,
        item.traceparent,
    )


def _fan_out(
    conn: Connection, new_events: list[Event], fanout: Fanout
) -> dict[int, list[Delivery]]:
    pairs = [(e, c) for e in new_events for c in fanout.channels_for(e)]
    by_event: dict[int, list[Delivery]] = {}
    if not pairs:
        return by_event
    initial = fanout.initial
    keys = new_message_ids(len(pairs))
    # Events stored in this transaction share one time, and so do their deliveries: it goes
    # once, as a constant, rather than twice in every row of a large batch.
    times = {e.created_at for e in new_events}
    shared = len(times) == 1
    values = [
        _new_delivery(e, c, initial[c.id], k, with_times=not shared)
        for (e, c), k in zip(pairs, keys, strict=True)
    ]
    constants = _shared_times(next(iter(times))) if shared else {}
    ids = insert_rows(conn, deliveries, values, [deliveries.c.id], constants=constants)
    for (event, channel), (delivery_id,), key in zip(pairs, ids, keys, strict=True):
        delivery = _delivery(delivery_id, event, channel, initial[channel.id], key)
        by_event.setdefault(event.id, []).append(delivery)
    return by_event


def _shared_times(at: datetime) -> dict[str, ColumnElement[Any]]:
    stamp = literal(at, UTCDateTime)
    return {"created_at": stamp, "next_attempt_at": stamp}


def new_message_ids(count: int) -> list[str]:
    """Fresh message ids (N1) for `count` new deliveries: one draw from the OS's random source
    for the whole batch. Every insert of a delivery row takes its id from here."""
    return message_id.many_from_random(os.urandom(count * message_id.RANDOM_BYTES))


def _new_delivery(
    event: Event,
    channel: Routed,
    initial: Initial,
    key: str,
    with_times: bool = True,
) -> dict[str, object]:
    state, skip = initial
    row: dict[str, object] = {
        "message_id": key,
        "event_id": event.id,
        "channel_id": channel.id,
        "state": state.value,
        "attempts": 0,
        "skip_reason": None if skip is None else skip.value,
    }
    if with_times:
        row["next_attempt_at"] = row["created_at"] = event.created_at
    return row


#: A row the publish leased to a waiting dispatcher (`tidings.store.handoff`).
_HANDED: Initial = (State.SENDING, None)


def _delivery(
    delivery_id: int,
    event: Event,
    channel: Routed,
    initial: Initial,
    key: str,
) -> Delivery:
    state, skip = initial
    # Positional, in Delivery's field order, as in `_event`.
    return Delivery(
        delivery_id,
        event.id,
        channel.id,
        state,
        1 if state is State.SENDING else 0,  # attempts: a handed row's counted (C1)
        event.created_at,  # next_attempt_at
        None,  # last_error
        None,  # failure
        skip,
        None,  # batch_id
        None,  # lease_owner
        None,  # lease_token
        event.created_at,
        None,  # sent_at
        key,  # message_id
    )


def insert_rows(
    conn: Connection,
    table: Table,
    values: Sequence[Mapping[str, Any]],
    returning: Sequence[ColumnElement[Any]],
    *,
    constants: Mapping[str, ColumnElement[Any]] | None = None,
    skip_conflicts_on: str | None = None,
) -> list[tuple[Any, ...]]:
    """Many rows in one statement, answered in the order sent (the first `returning` column
    must be the table's ascending id); a row clashing on `skip_conflicts_on` is skipped."""
    if not values:
        return []
    return dialect_for(conn).insert_rows(
        conn, table, values, returning, constants or {}, skip_conflicts_on
    )


def key_first_event(conn: Connection, key: str) -> PublishResult:
    """The first event of `key` and its deliveries (E2)."""
    row: RowMapping = (
        conn.execute(select(events).where(events.c.idempotency_key == key)).mappings().one()
    )
    found = conn.execute(
        select(deliveries).where(deliveries.c.event_id == row["id"]).order_by(deliveries.c.id)
    ).mappings()
    return PublishResult(
        event=rows.event(row), deliveries=[rows.delivery(r) for r in found], created=False
    )
