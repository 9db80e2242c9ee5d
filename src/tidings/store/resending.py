"""Manual resend (M1): a failed or skipped delivery back to pending, with an audit row."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from tidings.core.errors import Conflict, NotFound
from tidings.core.model import Delivery, ResendResult
from tidings.core.states import RESENDABLE, State
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.dialect import insert_ignoring_conflict, is_postgres
from tidings.store.notify import announce
from tidings.store.schema import deliveries, resends

d = deliveries


def resend(
    conn: Connection, clock: TxClock, delivery_id: int, operator: str, request_id: str
) -> ResendResult:
    """Requeue once per request id.

    The audit row is written first: its unique request id makes a repeated request a no-op,
    and a concurrent one with the same id waits for the first and then finds it.
    """
    _load(conn, delivery_id, lock=True)
    audit = insert_ignoring_conflict(conn, resends, "request_id").values(
        delivery_id=delivery_id, operator=operator, request_id=request_id, at=clock.at()
    )
    if conn.execute(audit).rowcount == 0:
        return _repeat(conn, delivery_id, request_id)
    requeued = (
        conn.execute(
            update(d)
            .where(d.c.id == delivery_id, d.c.state.in_([s.value for s in RESENDABLE]))
            .values(
                state=State.PENDING.value,
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
    announce(conn, [delivery.channel_id])
    return ResendResult(delivery=delivery, requeued=True)


def _repeat(conn: Connection, delivery_id: int, request_id: str) -> ResendResult:
    first = conn.scalar(select(resends.c.delivery_id).where(resends.c.request_id == request_id))
    if first != delivery_id:
        raise Conflict(f"request id {request_id!r} was already used for delivery {first}")
    return ResendResult(delivery=_load(conn, delivery_id, lock=False), requeued=False)


def _load(conn: Connection, delivery_id: int, *, lock: bool) -> Delivery:
    stmt = select(d).where(d.c.id == delivery_id)
    if lock and is_postgres(conn):
        # Serialises resends of one row; the loser then sees the winner's state (M1).
        stmt = stmt.with_for_update()
    row = conn.execute(stmt).mappings().first()
    if row is None:
        raise NotFound("delivery", delivery_id)
    return rows.delivery(row)
