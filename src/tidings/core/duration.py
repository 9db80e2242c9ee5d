"""Durations as operators write them: `90s`, `15m`, `12h`, `30d`, `2w`, or plain seconds.

Pure: imports only the standard library.
"""

from __future__ import annotations

import math
import re

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: Longer than any sensible expiry, short enough that `now + it` stays a valid timestamp.
MAX_S = 100 * 365 * 86400
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds in `text`; ValueError with a message fit for the user when it is not one."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 90s, 15m, 12h, 30d or 2w")
    seconds = float(match.group(1)) * UNITS_S[(match.group(2) or "s").lower()]
    return checked_seconds(seconds)


def checked_seconds(seconds: float) -> float:
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_S:
        raise ValueError(f"a duration must be more than 0 and at most {MAX_S // 86400} days")
    return seconds
