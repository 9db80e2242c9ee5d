"""Secrets in channel config never leave in reads, logs or the UI: `••••` + the last 4."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MASK = "••••"


def mask(value: str) -> str:
    return MASK + value[-4:] if len(value) > 8 else MASK


def redact_config(config: dict[str, Any], secret_fields: Iterable[str]) -> dict[str, Any]:
    redacted = dict(config)
    for name in secret_fields:
        value = redacted.get(name)
        if isinstance(value, str) and value:
            redacted[name] = mask(value)
    return redacted


def keep_unchanged_secrets(
    new: dict[str, Any], stored: dict[str, Any], secret_fields: Iterable[str]
) -> dict[str, Any]:
    """An edit form sends back the redacted value it was shown: keep the stored secret then."""
    merged = dict(new)
    for name in secret_fields:
        value = merged.get(name)
        if isinstance(value, str) and value.startswith(MASK) and name in stored:
            merged[name] = stored[name]
    return merged
