"""The state machine's guards as SQL: each write to a delivery's state is named after a
transition in `tidings.core.states.TRANSITIONS` and takes its WHERE clause from there.

States are written as literals, so the planner can match the partial indexes' predicates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, literal_column

from tidings.core.states import TRANSITIONS, Guard, State
from tidings.store.schema import deliveries

d = deliveries


def state_in(states: Iterable[State]) -> ColumnElement[bool]:
    values = sorted(s.value for s in states)
    if len(values) == 1:
        return d.c.state == literal_column(f"'{values[0]}'")
    return d.c.state.in_([literal_column(f"'{v}'") for v in values])


def guard(
    name: str,
    *,
    token: Any = None,
    now: ColumnElement[Any] | None = None,
    due_at: ColumnElement[Any] = d.c.next_attempt_at,
) -> ColumnElement[bool]:
    """The rows transition `name` may change: in one of its source states, and as its guard
    asks, still leased with `token` (bound as `:token` when not given) or due (`due_at`, the
    due time as the statement compares it) by `now`."""
    transition = TRANSITIONS[name]
    if transition.guard is Guard.NEW:
        raise ValueError(f"{name} creates rows; it has no guard")
    conditions = [state_in(transition.sources)]
    if transition.guard is Guard.LEASE:
        conditions.append(d.c.lease_token == (bindparam("token") if token is None else token))
    elif transition.guard is Guard.DUE:
        if now is None:
            raise ValueError(f"{name} is guarded by the due time: give `now`")
        conditions.append(due_at <= now)
    return and_(*conditions)


def target(name: str) -> str:
    """The state transition `name` ends in, as stored."""
    return TRANSITIONS[name].target.value
