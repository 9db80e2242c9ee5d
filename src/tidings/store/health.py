"""Channel health and the circuit breaker in the database (H1), cluster-wide.

The decisions are `tidings.core.breaker`'s; this module reads, claims a probe and records.
A channel without a row is healthy. What a recording changed (opened, recovered, disabled)
is announced as an operational event (H2) in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import literal, select, update
from sqlalchemy.engine import Connection

from tidings.core import breaker
from tidings.core.breaker import Admission, BreakerState, Health, Policy
from tidings.core.model import Channel
from tidings.core.text import LAST_ERROR_MAX_BYTES, storable
from tidings.store import channel_ops, operational
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.schema import channel_health, channels

h = channel_health


@dataclass(frozen=True, slots=True)
class Change:
    """What recording a claim's outcomes did to its channel."""

    opened: bool = False
    recovered: bool = False
    disabled: bool = False


def load(conn: Connection, channel_id: int, *, lock: bool = False) -> Health:
    stmt = select(h).where(h.c.channel_id == channel_id)
    if lock:
        stmt = dialect_for(conn).for_update(stmt)
    row = conn.execute(stmt).mappings().first()
    return breaker.HEALTHY if row is None else _health(row)


def _health(row: Any) -> Health:
    return Health(
        state=BreakerState(row["state"]),
        consecutive_failures=row["consecutive_failures"],
        failing_since=row["failing_since"],
        until=row["until"],
        backoff_s=row["backoff_s"],
        last_error=row["last_error"],
    )


def admission(conn: Connection, clock: TxClock, channel_id: int, lease_s: float) -> int | None:
    """How many rows a claim may lease as far as the breaker goes: None (as many as the rate
    allows), 1 (the probe, now taken by this claim) or 0."""
    health = load(conn, channel_id)
    now = clock.now()
    verdict = breaker.admits(health, now)
    if verdict is Admission.ALL:
        return None
    if verdict is Admission.NONE:
        return 0
    # Compare and set: of the claimers that saw the same health, one takes the probe.
    probe = breaker.probing(health, now, lease_s)
    taken = conn.execute(
        update(h)
        .where(
            h.c.channel_id == channel_id,
            h.c.state == health.state.value,
            h.c.until.is_(None) if health.until is None else h.c.until == health.until,
        )
        .values(state=probe.state.value, until=probe.until)
    ).rowcount
    return 1 if taken else 0


def record(
    conn: Connection,
    clock: TxClock,
    channel_id: int,
    delivered: bool,
    failures: int,
    error: str,
    policy: Policy,
) -> Change:
    """A claim's outcomes: a delivery closes the breaker; retryable failures count toward
    opening it, and failing long enough disables the channel."""
    before = _locked(conn, channel_id)
    now = clock.now()
    if delivered:
        after = breaker.after_success(before)
    elif failures:
        after = breaker.after_failures(before, failures, error, now, policy)
    else:
        return Change()
    if after == before:
        if after == breaker.HEALTHY:
            reset(conn, channel_id)  # the row `_locked` placed
        return Change()
    _save(conn, channel_id, after)
    channel = channel_ops.load_channel(conn, channel_id)
    if channel is None:
        return Change()
    change = Change(
        opened=breaker.opened(before, after),
        recovered=breaker.recovered(before, after),
        disabled=channel.enabled and breaker.should_disable(after, now, policy),
    )
    _announce(conn, clock, channel, after, change, policy)
    return change


def _locked(conn: Connection, channel_id: int) -> Health:
    """The channel's health, its row locked until commit.

    A healthy channel has no row, and a row that is not there cannot be locked: two
    recordings that both read "no row" would each write their own count over the other's,
    and a late one could close a breaker that had opened meanwhile (and its next failures
    announce a second opening). So a row is placed first (healthy, seen by nobody before
    commit, where `_save` replaces or removes it); a concurrent recording waits on it and
    then reads what this one wrote."""
    healthy = select(
        channels.c.id,
        literal(BreakerState.CLOSED.value),
        literal(0),
        literal(0.0),
    ).where(channels.c.id == channel_id)  # a channel deleted meanwhile gets none
    placeholder = dialect_for(conn).insert_ignoring_conflict(h, "channel_id")
    columns = ["channel_id", "state", "consecutive_failures", "backoff_s"]
    conn.execute(placeholder.from_select(columns, healthy))
    return load(conn, channel_id, lock=True)


def _save(conn: Connection, channel_id: int, health: Health) -> None:
    """A healthy channel has no row."""
    if health == breaker.HEALTHY:
        reset(conn, channel_id)
        return
    values = {
        "state": health.state.value,
        "consecutive_failures": health.consecutive_failures,
        "failing_since": health.failing_since,
        "until": health.until,
        "backoff_s": health.backoff_s,
        "last_error": storable(health.last_error, LAST_ERROR_MAX_BYTES),
    }
    conn.execute(update(h).where(h.c.channel_id == channel_id).values(values))


def _announce(
    conn: Connection,
    clock: TxClock,
    channel: Channel,
    health: Health,
    change: Change,
    policy: Policy,
) -> None:
    if change.disabled:
        reason = (
            f"disabled after failing for {policy.disable_after_s:g} s without a success: "
            f"{health.last_error or 'no answer'}"
        )
        channel_ops.set_enabled(conn, clock, channel.id, False, reason[:500])
    for kind, title in _events(channel, health, change):
        operational.publish(
            conn, clock, operational.channel_event(kind, title, channel, health), channel.id
        )


def _events(channel: Channel, health: Health, change: Change) -> list[tuple[str, str]]:
    found = []
    if change.opened:
        found.append(
            (
                operational.BREAKER_OPENED,
                f"{channel.name}: paused after {health.consecutive_failures} failures in a row",
            )
        )
    if change.recovered:
        found.append((operational.RECOVERED, f"{channel.name}: delivering again"))
    if change.disabled:
        found.append((operational.DISABLED, f"{channel.name}: disabled after failing too long"))
    return found


def health_of(conn: Connection) -> dict[int, Health]:
    """Every channel's health that is not plain healthy, by channel id."""
    return {r["channel_id"]: _health(r) for r in conn.execute(select(h)).mappings()}


def reset(conn: Connection, channel_id: int) -> None:
    """An operator's enable starts the channel afresh."""
    conn.execute(h.delete().where(h.c.channel_id == channel_id))
