"""Database errors leave the store as one-line StoreErrors in the driver's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

import tidings
from tidings.core.errors import StoreError


async def test_a_database_error_says_its_cause_in_one_line_without_the_statement(
    tmp_path: Path,
) -> None:
    """The SQL and its parameters stay out of the error (and so out of logs): they can be
    kilobytes long, and carry values such as channel secrets."""
    path = tmp_path / "broken.db"
    path.write_bytes(b"this is not a database" * 100)
    async with tidings.Hub(f"sqlite:///{path}") as hub:
        with pytest.raises(StoreError) as caught:
            await hub.channels.create(name="x", kind="inbox", config={})
    text = str(caught.value)
    assert text.startswith("database error: ")
    assert "\n" not in text
    assert "INSERT" not in text
    assert "SELECT" not in text
    assert len(text) <= 320
