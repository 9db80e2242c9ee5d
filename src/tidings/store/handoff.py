"""Hand-offs (PostgreSQL): a single publish leases its new rows to a waiting dispatcher and
tells it so in its notification, so that the dispatcher sends without claiming.

On an idle system the claim was a whole round trip between hearing of an event and sending
it: the notification woke the dispatcher, which leased the row it named, which the publish
had just written. Here the publish statement leases the rows itself (C1: `sending`, an
attempt counted, a lease of the dispatcher's length, a fresh token and its owner), in the
statement that stores them, and its NOTIFY carries the rows and their event (E3).

Only where the express claim would have leased the rows (`express._servable`: an enabled
realtime channel without a rate limit, a deadline, a provider's pause or an unhealthy
breaker), only for a publish of one event with few deliveries, an event small enough for
the notification, and only to a **seat** that is taken: each listening dispatcher holds one
(`take_seat`), with a row of `express_seats` saying whose it is, the lease it takes and the
generation of this taking, and a session advisory lock on that generation, held by its
LISTEN connection. The publish tests the lock (`pg_try_advisory_xact_lock_shared` fails only
while it is held), so a dispatcher that died, or whose connection dropped, is handed
nothing. Should it die after the publish tested its seat, its rows wait out their lease like
any claim's (C2).

The notification names the generation, and only the connection that took it takes the
hand-off: a dispatcher that has just left its seat still takes what a publish handed it a
moment before, and the next to take the seat — under a generation of its own, locked only
once its row is in — never takes it too.

Everything else, and every publish with no seat taken, stays `pending` for the claims.
"""

from __future__ import annotations

import secrets
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tidings.core import jsontext
from tidings.core.model import Channel, Claim, ClaimedDelivery, Delivery, Event
from tidings.core.states import State
from tidings.store import rows

#: The first key of the advisory lock on a seat's number (the second is the number), held
#: by whoever takes the seat: "td" in ASCII.
SEAT_LOCK_CLASS = 0x7464
#: The first key of the lock on a seat's generation (the second is the generation): held
#: once the seat's row names it, it says the seat is taken.
LIVE_LOCK_CLASS = 0x7465
#: Seats there are: the dispatchers that can wait for hand-offs at once.
SEATS = 16
#: The most deliveries a publish hands off: its notification names each one.
MAX_HANDED = 16
#: The largest event, as JSON, a notification carries (NOTIFY refuses 8,000 bytes or more;
#: the rest of the payload is under 1,000 with `MAX_HANDED` rows).
MAX_EVENT_BYTES = 6000
#: Separates the channels a notification names (`notify.encode_hint`) from its hand-off.
MARK = "|"

_CHOOSE_SEAT = f"""
SELECT s FROM generate_series(0, {SEATS - 1}) AS s
WHERE pg_try_advisory_lock({SEAT_LOCK_CLASS}, s)
LIMIT 1"""
_NAME_SEAT = """
INSERT INTO express_seats (seat, owner, lease_s, generation) VALUES ($1, $2, $3, $4)
ON CONFLICT (seat) DO UPDATE
SET owner = excluded.owner, lease_s = excluded.lease_s, generation = excluded.generation"""
_OPEN_SEAT = f"SELECT pg_try_advisory_lock({LIVE_LOCK_CLASS}, $1)"
_LEAVE_SEAT = (
    f"SELECT pg_advisory_unlock({LIVE_LOCK_CLASS}, $2), pg_advisory_unlock({SEAT_LOCK_CLASS}, $1)"
)


@dataclass(frozen=True)
class Seat:
    number: int
    generation: int


async def take_seat(conn: Any, owner: str, lease_s: float) -> Seat | None:
    """Take the first free seat on `conn` (an asyncpg connection, for as long as it lives)
    for `owner` and its lease; None when all are taken. Its number first, then its row under
    a new generation, then — the row committed — the generation's lock: a publish that sees
    that lock reads the row that names it."""
    number = await conn.fetchval(_CHOOSE_SEAT)
    if number is None:
        return None
    for _ in range(3):  # a generation another seat holds (one in two billion): another
        generation = 1 + secrets.randbelow(2**31 - 1)
        await conn.execute(_NAME_SEAT, number, owner, lease_s, generation)
        if await conn.fetchval(_OPEN_SEAT, generation):
            return Seat(int(number), generation)
    await conn.fetchval(f"SELECT pg_advisory_unlock({SEAT_LOCK_CLASS}, $1)", number)
    return None


async def leave_seat(conn: Any, seat: Seat) -> None:
    """Give the seat up: publishes hand nothing more to it."""
    await conn.fetchval(_LEAVE_SEAT, seat.number, seat.generation, timeout=5)


def seat_cte() -> str:
    """`seat`: a taken seat, at most one (a seat whose lock is free is nobody's); `hand`: it,
    where the event fits the notification (`doc`). Tested first, so that a publish with no
    dispatcher waiting reads no channel and builds no document."""
    return f"""seat AS MATERIALIZED (
    SELECT s.seat, s.owner, s.lease_s, s.generation FROM express_seats AS s
    WHERE NOT pg_try_advisory_xact_lock_shared({LIVE_LOCK_CLASS}, s.generation)
    LIMIT 1
),
hand AS MATERIALIZED (
    SELECT * FROM seat
    WHERE octet_length(CAST((SELECT doc FROM doc) AS text)) <= {MAX_EVENT_BYTES}
)"""


def servable_cte(channel_ids: str) -> str:
    """`servable`: the publish's channels the express claim would serve now (its
    `_servable`, on the stored channel), read only when there is a seat to hand to;
    `channel_ids`: the SQL of their ids."""
    return f"""servable AS MATERIALIZED (
    SELECT c.id, c.updated_at FROM channels AS c
    WHERE EXISTS (SELECT FROM hand)
        AND c.id = ANY({channel_ids})
        AND c.enabled AND c.mode = 'realtime' AND c.rate_per_min <= 0
        AND c.max_age_s IS NULL
        AND NOT EXISTS (
            SELECT FROM rate_buckets AS b WHERE b.channel_id = c.id AND b.paused_until > now()
        )
        AND NOT EXISTS (SELECT FROM channel_health AS h WHERE h.channel_id = c.id)
)"""


def doc_cte(now: str, columns: Iterable[str], json_columns: Container[str]) -> str:
    """`doc`: the event as its notification carries it, `Event`'s fields: its id, its
    `columns` as given (`json_columns` as JSON) and its time."""
    fields = ", ".join(
        f"'{name}', CAST(g.{name} AS json)" if name in json_columns else f"'{name}', g.{name}"
        for name in columns
    )
    return f"""doc AS MATERIALIZED (
    SELECT json_build_object('id', g.id, {fields}, 'created_at', {now}) AS doc
    FROM given AS g
)"""


def handed_cte() -> str:
    """`handed`: each servable channel with the seat it goes to (none without a seat)."""
    return """handed AS MATERIALIZED (
    SELECT sv.id AS channel_id, sv.updated_at, hd.seat, hd.owner, hd.lease_s
    FROM servable AS sv CROSS JOIN hand AS hd
)"""


def payload_sql() -> str:
    """The hand-off the notification carries after `MARK` ('' when nothing was handed)."""
    return f"""COALESCE((
    SELECT '{MARK}' || json_build_object(
        's', hd.seat, 'g', hd.generation, 'o', hd.owner, 'l', hd.lease_s,
        'e', (SELECT doc FROM doc),
        'r', (
            SELECT json_agg(json_build_array(f.id, f.channel_id, f.message_id, f.lease_token,
                h.updated_at) ORDER BY f.id)
            FROM fanned AS f JOIN handed AS h ON h.channel_id = f.channel_id
            WHERE f.lease_token IS NOT NULL
        ))
    FROM hand AS hd
    WHERE EXISTS (SELECT FROM fanned WHERE lease_token IS NOT NULL)
), '')"""


@dataclass(frozen=True)
class HandedRow:
    delivery_id: int
    channel_id: int
    message_id: str
    token: str
    #: The channel's `updated_at` as the publish saw it: a dispatcher whose copy differs
    #: reads the channel again.
    channel_updated_at: datetime


@dataclass(frozen=True)
class HandOff:
    seat: int
    #: The seat's taking it was handed to (`take_seat`): only that connection takes it.
    generation: int
    owner: str
    lease_s: float
    event: Event
    rows: list[HandedRow]

    @property
    def channel_ids(self) -> frozenset[int]:
        return frozenset(row.channel_id for row in self.rows)

    def claims(self, channels: Mapping[int, Channel]) -> list[Claim]:
        """A claim per channel (one row each: a publish of one event), from `channels`
        (those the caller has; a row whose channel is missing is left out)."""
        lease_ends = self.event.created_at + timedelta(seconds=self.lease_s)
        found = []
        for row in self.rows:
            channel = channels.get(row.channel_id)
            if channel is None:
                continue
            delivery = Delivery(
                row.delivery_id,
                self.event.id,
                row.channel_id,
                State.SENDING,
                1,  # attempts: the publish counted this one (C1)
                lease_ends,  # next_attempt_at
                None,  # last_error
                None,  # failure
                None,  # skip_reason
                None,  # batch_id
                self.owner,
                row.token,
                self.event.created_at,
                None,  # sent_at
                row.message_id,
            )
            item = ClaimedDelivery(delivery, self.event)
            found.append(Claim(row.token, self.owner, channel, [item], lease_ends))
        return found


def split(payload: str) -> tuple[str, str]:
    """A notification's payload as (the channels it names, its hand-off or '')."""
    hint, _, handed = payload.partition(MARK)
    return hint, handed


def decode(handed: str) -> HandOff | None:
    """The hand-off a notification carries; None for one this version cannot read (a
    newer one's): its rows wait out their lease, then go to the claims."""
    try:
        doc = jsontext.loads(handed)
        event_doc = doc["e"]
        event_doc["created_at"] = _utc(event_doc["created_at"])
        event = rows.event(event_doc)
        handed_rows = [
            HandedRow(int(d), int(c), str(m), str(t), _utc(u)) for d, c, m, t, u in doc["r"]
        ]
        seat, generation, owner, lease_s = int(doc["s"]), int(doc["g"]), str(doc["o"]), doc["l"]
        return HandOff(seat, generation, owner, float(lease_s), event, handed_rows)
    except (KeyError, TypeError, ValueError):  # a JSON error is a ValueError
        return None


def _utc(text: str) -> datetime:
    """A timestamp as PostgreSQL writes it into JSON (in the session's time zone), in UTC as
    the store reads every other."""
    return datetime.fromisoformat(text).astimezone(UTC)
