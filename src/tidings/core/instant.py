"""Instants given by users (history's `since` / `until`) as aware UTC, or a 422 naming the
field when the offset pushes them out of the representable range (years 1 to 9999 in UTC).

Pure: imports only the standard library.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tidings.core.errors import ValidationError


def utc_instant(value: datetime, field: str) -> datetime:
    """`value` in UTC (a naive value is read as UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # 9999-12-31T23:59:59-23:00 is in year 10000 in UTC, 0001-01-01T00:00+05:00 in year 0.
        raise ValidationError(field, "out of range: years 1 to 9999 in UTC") from None
