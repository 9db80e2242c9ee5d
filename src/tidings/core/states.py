"""Delivery states and the transitions between them: the state machine as a table.

Pure: imports only the standard library. The store's writes are named after the transitions
listed here and take their guard from the table: the source states, and the lease token (a
worker's outcome) or the due time (a claim, the sweep of lost leases and expired rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    SKIPPED = "skipped"


class Failure(StrEnum):
    """Why a delivery ended `failed`."""

    PERMANENT = "permanent"
    EXHAUSTED = "exhausted"
    EXPIRED = "expired"


class SkipReason(StrEnum):
    CHANNEL_DISABLED = "channel_disabled"


class Mode(StrEnum):
    REALTIME = "realtime"
    DIGEST = "digest"


class AttemptStatus(StrEnum):
    DELIVERED = "delivered"
    RETRYABLE = "retryable"
    PERMANENT = "permanent"
    RATE_LIMITED = "rate_limited"
    DEFERRED = "deferred"
    PARTIAL = "partial"
    EXPIRED = "expired"
    #: A lease ended without an outcome: its worker crashed or stalled (not an attempt).
    LEASE_LOST = "lease_lost"


#: States a claim may pick up: pending rows that are due, and sending rows whose lease ran out.
CLAIMABLE: frozenset[State] = frozenset({State.PENDING, State.SENDING})

#: States a delivery never leaves on its own; only an operator's resend (M1) reopens them.
FINAL: frozenset[State] = frozenset({State.SENT, State.FAILED, State.SKIPPED})

#: States an operator may resend from (M1).
RESENDABLE: frozenset[State] = frozenset({State.FAILED, State.SKIPPED})


class Guard(StrEnum):
    """What a transition's write requires of a row besides its state being a source state."""

    #: Creates the row (publishing).
    NEW = "new row"
    #: Only the state.
    STATE = "state"
    #: Due now (`next_attempt_at <= now`): a pending row whose time came, or a sending row
    #: whose lease ran out (C2).
    DUE = "state, due now"
    #: Still leased with the writer's token (C3): a worker whose lease passed on changes nothing.
    LEASE = "state, lease token"


@dataclass(frozen=True, slots=True)
class Transition:
    name: str
    sources: frozenset[State]
    target: State
    guard: Guard
    meaning: str


_SENDING = frozenset({State.SENDING})


def _table(*transitions: Transition) -> dict[str, Transition]:
    return {t.name: t for t in transitions}


#: Every change of a delivery's state. The store's writes are named after these and take
#: their guard (source states, and lease token or due time) from here.
TRANSITIONS: dict[str, Transition] = _table(
    Transition("publish", frozenset(), State.PENDING, Guard.NEW,
               "E1: event stored, channel enabled and matching"),
    Transition("publish_skipped", frozenset(), State.SKIPPED, Guard.NEW,
               "E1: channel matching but disabled"),
    Transition("claim", CLAIMABLE, State.SENDING, Guard.DUE,
               "C1: due row leased, attempts+1"),
    Transition("mark_sent", _SENDING, State.SENT, Guard.LEASE, "O1: delivered"),
    Transition("schedule_retry", _SENDING, State.PENDING, Guard.LEASE,
               "O2: retryable failure, due after backoff"),
    Transition("exhaust", _SENDING, State.FAILED, Guard.LEASE,
               "O2: retryable failure with max_attempts spent"),
    Transition("fail", _SENDING, State.FAILED, Guard.LEASE,
               "O3: permanent failure (or a message that cannot be rendered)"),
    Transition("rate_limited", _SENDING, State.PENDING, Guard.LEASE,
               "O4: provider rate limit, attempt revoked"),
    Transition("defer", _SENDING, State.PENDING, Guard.LEASE,
               "D5/W3: not sent now, attempt revoked, due at once"),
    Transition("skip_on_return", _SENDING, State.SKIPPED, Guard.LEASE,
               "C7: channel disabled while in flight; the row would have gone back to pending"),
    Transition("release_lost", _SENDING, State.PENDING, Guard.DUE,
               "C2: lease ran out without an outcome; claimable again, audited"),
    Transition("exhaust_lost", _SENDING, State.FAILED, Guard.DUE,
               "C2: lease ran out after the last attempt (a crash loop ends)"),
    Transition("expire", CLAIMABLE, State.FAILED, Guard.DUE,
               "O5: older than the channel's max_age_s"),
    Transition("skip", frozenset({State.PENDING}), State.SKIPPED, Guard.STATE,
               "C7: channel disabled"),
    Transition("resend", RESENDABLE, State.PENDING, Guard.STATE,
               "M1: operator resend, attempts=0, due now"),
)  # fmt: skip


def can_transition(name: str, current: State) -> bool:
    """True when the transition `name` may start from `current`."""
    return current in TRANSITIONS[name].sources


def state_machine_markdown() -> str:
    """The table above as Markdown: `docs/state_machine.md` is this text, checked by a test."""
    lines = [
        "# Delivery state machine",
        "",
        "Generated from `tidings.core.states.TRANSITIONS`; a test keeps this file in step.",
        "",
        "| transition | from | to | guard | meaning |",
        "|---|---|---|---|---|",
    ]
    for t in TRANSITIONS.values():
        source_text = ", ".join(sorted(s.value for s in t.sources)) or "(new row)"
        lines.append(
            f"| `{t.name}` | {source_text} | {t.target.value} | {t.guard.value} | {t.meaning} |"
        )
    lines += ["", "```mermaid", "stateDiagram-v2"]
    for t in TRANSITIONS.values():
        origins = sorted(s.value for s in t.sources) or ["[*]"]
        lines += [f"    {origin} --> {t.target.value}: {t.name}" for origin in origins]
    lines += ["```", ""]
    return "\n".join(lines)
