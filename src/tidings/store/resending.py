"""Manual resend (M1): a failed or skipped delivery back to pending, with an audit row."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from tidings.core.errors import Conflict, NotFound
from tidings.core.model import Delivery, ResendResult
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.schema import deliveries, resends
from tidings.store.transitions import guard, target

d = deliveries


def resend(
    conn: Connection, clock: TxClock, delivery_id: int, operator: str, request_id: str
) -> ResendResult:
    """Requeue once per request id.

    The audit row is written first: its unique request id makes a repeated request a no-op,
    and a concurrent one with the same id waits for the first and then finds it.
    """
    dialect = dialect_for(conn)
    _load(conn, delivery_id, lock=True)
    audit = dialect.insert_ignoring_conflict(resends, "request_id").values(
        delivery_id=delivery_id, operator=operator, request_id=request_id, at=clock.at()
    )
    if conn.execute(audit).rowcount == 0:
        return _repeat(conn, delivery_id, request_id)
    requeued = (
        conn.execute(
            update(d)
            .where(d.c.id == delivery_id, guard("resend"))
            .values(
                state=target("resend"),
                attempts=0,
                next_attempt_at=clock.at(),
                last_error=None,
                failure=None,
                skip_reason=None,
                lease_token=None,
                lease_owner=None,
            )
            .returning(*d.c)
        )
        .mappings()
        .first()
    )
    if requeued is None:
        current = _load(conn, delivery_id, lock=False)
        raise Conflict(
            f"delivery {delivery_id} is {current.state.value}; "
            "only failed or skipped deliveries can be resent"
        )
    delivery = rows.delivery(requeued)
    dialect.announce(conn, [delivery.channel_id])
    return ResendResult(delivery=delivery, requeued=True)


def _repeat(conn: Connection, delivery_id: int, request_id: str) -> ResendResult:
    first = conn.scalar(select(resends.c.delivery_id).where(resends.c.request_id == request_id))
    if first != delivery_id:
        raise Conflict(f"request id {request_id!r} was already used for delivery {first}")
    return ResendResult(delivery=_load(conn, delivery_id, lock=False), requeued=False)


def _load(conn: Connection, delivery_id: int, *, lock: bool) -> Delivery:
    stmt = select(d).where(d.c.id == delivery_id)
    if lock:
        # Serialises resends of one row; the loser then sees the winner's state (M1).
        stmt = dialect_for(conn).for_update(stmt)
    row = conn.execute(stmt).mappings().first()
    if row is None:
        raise NotFound("delivery", delivery_id)
    return rows.delivery(row)
