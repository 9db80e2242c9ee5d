"""The delivery state machine table, and the generated docs/state_machine.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidings.core.states import (
    CLAIMABLE,
    FINAL,
    RESENDABLE,
    TRANSITIONS,
    Guard,
    State,
    can_transition,
    state_machine_markdown,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "state_machine.md"
REGENERATE = (
    'python -c "from tidings.core.states import state_machine_markdown as m; '
    "print(m(), end='')\" > docs/state_machine.md"
)


def test_every_transition_ends_in_a_state_and_starts_from_states() -> None:
    for name, t in TRANSITIONS.items():
        assert t.name == name
        assert isinstance(t.target, State), name
        assert all(isinstance(s, State) for s in t.sources), name
        assert t.meaning, name


def test_guards_fit_their_sources() -> None:
    """Only new rows have no source; a lease token guards only writes on leased rows."""
    for t in TRANSITIONS.values():
        assert (t.guard is Guard.NEW) == (not t.sources), t.name
        if t.guard is Guard.LEASE:
            assert t.sources == {State.SENDING}, t.name


def test_state_sets_are_consistent() -> None:
    assert set(State) == CLAIMABLE | FINAL
    assert not CLAIMABLE & FINAL
    assert RESENDABLE <= FINAL
    assert State.SENT not in RESENDABLE  # a sent message is never sent again by resend


def test_final_states_are_left_only_by_resend() -> None:
    for name, t in TRANSITIONS.items():
        if t.sources & FINAL:
            assert name == "resend"
            assert t.sources == RESENDABLE


def test_every_state_is_reachable() -> None:
    assert {t.target for t in TRANSITIONS.values()} == set(State)


def test_only_publish_creates_rows() -> None:
    creators = {name for name, t in TRANSITIONS.items() if not t.sources}
    assert creators == {"publish", "publish_skipped"}


@pytest.mark.parametrize(
    ("name", "current", "allowed"),
    [
        ("claim", State.PENDING, True),
        ("claim", State.SENDING, True),  # lease expired (C2)
        ("claim", State.SENT, False),
        ("mark_sent", State.SENDING, True),
        ("mark_sent", State.PENDING, False),
        ("schedule_retry", State.SENDING, True),
        ("rate_limited", State.PENDING, False),
        ("release_lost", State.SENDING, True),
        ("release_lost", State.PENDING, False),
        ("exhaust_lost", State.SENDING, True),
        ("expire", State.PENDING, True),
        ("skip", State.PENDING, True),
        ("skip", State.SENDING, False),
        ("resend", State.FAILED, True),
        ("resend", State.SKIPPED, True),
        ("resend", State.SENT, False),
        ("resend", State.PENDING, False),
        ("publish", State.PENDING, False),
    ],
)
def test_can_transition(name: str, current: State, allowed: bool) -> None:
    assert can_transition(name, current) is allowed


def test_unknown_transition_is_an_error() -> None:
    with pytest.raises(KeyError):
        can_transition("teleport", State.PENDING)


def test_markdown_lists_every_transition() -> None:
    text = state_machine_markdown()
    for name in TRANSITIONS:
        assert f"| `{name}` |" in text


def test_docs_state_machine_is_generated_from_the_table() -> None:
    assert DOC.exists(), f"{DOC} is missing; regenerate it from the repo root with: {REGENERATE}"
    assert DOC.read_text(encoding="utf-8") == state_machine_markdown(), (
        f"{DOC} is out of date; regenerate it from the repo root with: {REGENERATE}"
    )
