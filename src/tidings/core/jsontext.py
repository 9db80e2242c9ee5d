"""Compact UTF-8 JSON for what tidings sends and stores: orjson, ~10× faster than `json`.

orjson refuses integers beyond 64 bits, which events may carry in `data`: those documents go
through `json` instead, with the same compact, non-escaping output.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_FALLBACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(document: Any) -> bytes:
    try:
        return orjson.dumps(document)
    except TypeError:  # an integer beyond 64 bits
        return _FALLBACK.encode(document).encode()
