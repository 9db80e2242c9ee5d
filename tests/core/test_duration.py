"""Durations as operators write them (`--expires-in 30d`)."""

from __future__ import annotations

import pytest

from tidings.core.duration import MAX_S, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("15m", 900),
        ("12h", 43200),
        ("30d", 2592000),
        ("2w", 1209600),
        ("1.5h", 5400),
        (" 7D ", 604800),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0d", "-1d", "soon", "1y", "1e9d", "nan", "30 days"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_the_longest() -> None:
    assert parse_duration(f"{MAX_S}") == MAX_S
