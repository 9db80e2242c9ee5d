"""The history filters (M2) as the UI reads them from a query string, and back into links."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from starlette.datastructures import QueryParams

from tidings.core.errors import ValidationError
from tidings.core.instant import utc_instant
from tidings.core.model import DeliveryQuery
from tidings.core.states import State
from tidings.core.text import ascii_digits, has_unstorable

#: Largest id a path or filter may name (a bigint); anything larger is simply not found.
MAX_ID = 2**63 - 1
FILTER_KEYS = ("channel", "state", "kind", "since", "until")


@dataclass(frozen=True)
class Filters:
    #: The filter values as given (valid ones only), to rebuild links and refill the form.
    params: dict[str, str]
    query: DeliveryQuery
    errors: list[str] = field(default_factory=list)


def read_filters(source: QueryParams | dict[str, str]) -> Filters:
    params: dict[str, str] = {}
    errors: list[str] = []
    values = {key: str(source.get(key) or "").strip() for key in FILTER_KEYS}
    channel_id = _whole(values["channel"])
    if values["channel"] and channel_id is None:
        errors.append("channel: not a channel id")
    state = values["state"] if values["state"] in {s.value for s in State} else None
    if values["state"] and state is None:
        errors.append(f"state: one of {', '.join(s.value for s in State)}")
    kind = values["kind"][:200] or None
    if kind is not None and has_unstorable(kind):
        errors.append("kind: must not contain NUL or unpaired surrogates")
        kind = None
    since, until = _time(values["since"], "since", errors), _time(values["until"], "until", errors)
    query = DeliveryQuery(
        channel_id=channel_id,
        state=State(state) if state else None,
        event_kind=kind,
        since=since,
        until=until,
    )
    for key, ok in (
        ("channel", channel_id is not None),
        ("state", state is not None),
        ("kind", kind is not None),
        ("since", since is not None),
        ("until", until is not None),
    ):
        if ok:
            params[key] = values[key]
    return Filters(params, query, errors)


def page_number(value: str | None) -> int | None:
    number = _whole(value or "")
    return min(number, 2**31) if number is not None else None


def _whole(value: str) -> int | None:
    if not ascii_digits(value):
        return None
    number = int(value)
    return number if 1 <= number <= MAX_ID else None


def _time(value: str, key: str, errors: list[str]) -> datetime | None:
    """`datetime-local` input (read as UTC) or RFC 3339; a bad one is noted in `errors`."""
    if not value:
        return None
    try:
        return utc_instant(datetime.fromisoformat(value.replace("Z", "+00:00")), key)
    except ValueError:
        errors.append(f"{key}: not a date and time (YYYY-MM-DDTHH:MM, UTC)")
    except ValidationError as error:
        errors.append(error.message)
    return None
