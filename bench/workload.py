"""What the scenarios send: the benchmark event, a webhook channel spec, and setting up and
filling a tidings database through the library. Imports tidings only, on first use."""

from __future__ import annotations

from typing import Any


def event(i: int, **extra: Any) -> dict[str, Any]:
    """Event number `i`, a typical alert; `extra` goes into its data. bench/peers/harness.py
    keeps a copy (the peers' environment has no tidings)."""
    return {
        "kind": "bench.event",
        "subject": f"host-{i % 97}",
        "severity": "high",
        "title": f"bench event {i}: something happened on host-{i % 97}",
        "body": "A benchmark event with a short body of typical length for an alert.",
        "data": {"i": i, **extra},
    }


def webhook(name: str, url: str, **fields: Any) -> dict[str, Any]:
    """A webhook channel with no rate limit and a short retry backoff, so only the
    dispatcher's own work is measured."""
    return {
        "name": name,
        "kind": "webhook",
        "config": {"url": url},
        "rate_per_min": 0,
        "timeout_s": 10,
        "retry_backoff_s": 0.05,
    } | fields


async def setup(url: str, channels: list[dict[str, Any]]) -> None:
    """Migrate the database at `url` and create `channels` (specs as `webhook()` makes)."""
    import tidings  # on use: see bench/scenarios/raw.py

    async with tidings.Hub(url) as hub:
        await hub.migrate()
        for spec in channels:
            await hub.channels.create(**spec)


async def publish_all(url: str, events: list[dict[str, Any]], batch: int = 1000) -> None:
    import tidings

    async with tidings.Hub(url) as hub:
        for start in range(0, len(events), batch):
            await hub.publish_many(events[start : start + batch])
