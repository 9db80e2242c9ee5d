"""Delivery states and the transitions between them: the state machine as a table.

Pure: imports only the standard library. The store's write operations are named after the
transitions listed here, and each is guarded by the state it expects.
"""

from __future__ import annotations

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


#: States a claim may pick up: pending rows that are due, and sending rows whose lease ran out.
CLAIMABLE: frozenset[State] = frozenset({State.PENDING, State.SENDING})

#: States a delivery never leaves on its own; only an operator's resend (M1) reopens them.
FINAL: frozenset[State] = frozenset({State.SENT, State.FAILED, State.SKIPPED})

#: States an operator may resend from (M1).
RESENDABLE: frozenset[State] = frozenset({State.FAILED, State.SKIPPED})


# transition name -> (states it starts from, state it ends in, what it means)
TRANSITIONS: dict[str, tuple[frozenset[State], State, str]] = {
    "publish": (frozenset(), State.PENDING, "E1: event stored, channel enabled and matching"),
    "publish_skipped": (frozenset(), State.SKIPPED, "E1: channel matching but disabled"),
    "claim": (CLAIMABLE, State.SENDING, "C1: due row leased, attempts+1"),
    "mark_sent": (frozenset({State.SENDING}), State.SENT, "O1: delivered"),
    "schedule_retry": (
        frozenset({State.SENDING}),
        State.PENDING,
        "O2: retryable failure, due after backoff",
    ),
    "exhaust": (frozenset({State.SENDING}), State.FAILED, "O2/C2: max_attempts spent"),
    "fail": (frozenset({State.SENDING}), State.FAILED, "O3: permanent failure"),
    "rate_limited": (
        frozenset({State.SENDING}),
        State.PENDING,
        "O4: provider rate limit, attempt revoked",
    ),
    "defer": (
        frozenset({State.SENDING}),
        State.PENDING,
        "D5/W3: not sent now, attempt revoked, due at once",
    ),
    "expire": (CLAIMABLE, State.FAILED, "O5: older than the channel's max_age_s"),
    "skip": (frozenset({State.PENDING}), State.SKIPPED, "C7: channel disabled"),
    "skip_on_return": (
        frozenset({State.SENDING}),
        State.SKIPPED,
        "C7: channel disabled while the row was in flight and it would go back to pending",
    ),
    "resend": (RESENDABLE, State.PENDING, "M1: operator resend, attempts=0, due now"),
}


def can_transition(name: str, current: State) -> bool:
    """True when the transition `name` may start from `current`."""
    sources, _, _ = TRANSITIONS[name]
    return current in sources


def state_machine_markdown() -> str:
    """The table above as Markdown: `docs/state_machine.md` is this text, checked by a test."""
    lines = [
        "# Delivery state machine",
        "",
        "Generated from `tidings.core.states.TRANSITIONS`; a test keeps this file in step.",
        "",
        "| transition | from | to | meaning |",
        "|---|---|---|---|",
    ]
    for name, (sources, target, meaning) in TRANSITIONS.items():
        source_text = ", ".join(sorted(s.value for s in sources)) or "(new row)"
        lines.append(f"| `{name}` | {source_text} | {target.value} | {meaning} |")
    lines += ["", "```mermaid", "stateDiagram-v2"]
    lines.append("    [*] --> pending: publish")
    lines.append("    [*] --> skipped: publish_skipped")
    for name, (sources, target, _) in TRANSITIONS.items():
        for source in sorted(sources, key=lambda s: s.value):
            lines.append(f"    {source.value} --> {target.value}: {name}")
    lines += ["```", ""]
    return "\n".join(lines)
