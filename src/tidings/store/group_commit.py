"""Group commit of single publishes: events published concurrently in one process share one
transaction, and each publisher is answered once that transaction has committed.

A group is all or nothing like any transaction, but its publishers are strangers: an event
that makes the group fail must fail alone. When a statement fails on what it was given (a
clash with stored data, a value the database refuses), nothing was sent to COMMIT and the
transaction certainly rolled back: each event of the group is published again in a
transaction of its own, and only the guilty one gets the error. When the database fails
(unreachable, gone mid-transaction) or the COMMIT itself fails, every publisher of the group
gets that error: nothing is retried that might have been stored already, and a database
that is down is not asked again once per event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy import exc
from sqlalchemy.engine import Connection

from tidings.core.model import EventInput, PublishResult
from tidings.store import publishing
from tidings.store.clock import TxClock

#: Events one group's transaction holds at most (its inserts are multi-row statements).
MAX_GROUP = 500
#: Groups committing at a time. One: the next group gathers everything that arrived while
#: the previous one committed, which costs the least CPU per event (measured against 2 and 4
#: on PostgreSQL with 4 and 32 concurrent publishers; on SQLite transactions queue for its
#: one writer anyway).
GROUPS_IN_FLIGHT = 1

Answers = list[PublishResult | Exception]
#: How the store runs an operation in a transaction of its own (`Runner._run`).
RunTx = Callable[..., Awaitable[list[PublishResult]]]


class _Statements:
    """The group's operation, remembering whether every statement went through."""

    def __init__(self, known: publishing.KnownChannels | None) -> None:
        self.done = False
        self.known = known

    def __call__(
        self, conn: Connection, clock: TxClock, inputs: Sequence[EventInput]
    ) -> list[PublishResult]:
        results = publishing.publish_events(conn, clock, inputs, known=self.known)
        self.done = True
        return results


async def publish_group(
    run_tx: RunTx, inputs: list[EventInput], known: publishing.KnownChannels | None = None
) -> Answers:
    """One answer per event, in order: its result, or the error it alone gets. `known`: the
    channels this process read before (`publishing.KnownChannels`)."""
    statements = _Statements(known)
    try:
        return list(await run_tx(statements, inputs))
    except Exception as error:
        if statements.done or len(inputs) == 1 or not _one_event_may_be_guilty(error):
            return [error] * len(inputs)
    return [await _alone(run_tx, item, known) for item in inputs]


def _one_event_may_be_guilty(error: Exception) -> bool:
    """The statement failed on what it was given, not for want of a working database.
    (The store raises its own errors `from` the driver's.)"""
    cause = error.__cause__ if error.__cause__ is not None else error
    if isinstance(cause, exc.IntegrityError | exc.DataError | exc.ProgrammingError):
        return True
    return not isinstance(cause, exc.DBAPIError | exc.InterfaceError | OSError)


async def _alone(
    run_tx: RunTx, item: EventInput, known: publishing.KnownChannels | None
) -> PublishResult | Exception:
    try:
        (result,) = await run_tx(publishing.publish_events, [item], None, known)
    except Exception as error:
        return error
    return result
