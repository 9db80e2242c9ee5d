"""The remote-worker protocol (W4) on the server's side: claimed and rendered leases out as
JSON, reported results in from JSON and recorded.

Service level: imports tidings.dispatch (leasing, its wire format) and the Store's type.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from tidings.channels.registry import Registry
from tidings.core.instant import utc_instant
from tidings.dispatch import leasing, wire
from tidings.dispatch.leasing import Lease
from tidings.dispatch.report import SendResult
from tidings.store import Store


async def lease(
    store: Store,
    registry: Registry,
    lease_s: float,
    worker_id: str,
    kinds: Sequence[str] | None,
    tenants: Sequence[str] | None,
    max_messages: int,
) -> dict[str, Any]:
    """Claim and render due messages the worker can send; the lease answer's JSON."""
    leases = await leasing.lease_work(
        store,
        registry,
        worker_id=worker_id,
        capabilities=_capabilities(kinds, tenants),
        max_messages=max_messages,
        lease_s=lease_s,
        rand=random.random,
    )
    return {"leases": wire_leases(leases), "lease_s": lease_s}


async def report(
    store: Store,
    registry: Registry,
    token: str,
    worker_id: str,
    results: Sequence[Mapping[str, Any]],
    kinds: Sequence[str] | None = None,
    tenants: Sequence[str] | None = None,
) -> dict[str, int]:
    """Record reported outcomes, fenced by the lease token (C3) and by the kinds and tenants
    the reporting worker may serve; the report answer's JSON."""
    recorded, fenced = await leasing.apply_report(
        store,
        registry,
        token=token,
        worker_id=worker_id,
        results=wire_results(results),
        rand=random.random,
        capabilities=_capabilities(kinds, tenants),
    )
    return {"recorded": recorded, "fenced": fenced}


def _capabilities(
    kinds: Sequence[str] | None, tenants: Sequence[str] | None
) -> leasing.Capabilities:
    return leasing.Capabilities(
        kinds=set(kinds) if kinds is not None else None,
        tenants=set(tenants) if tenants is not None else None,
    )


def wire_leases(leases: Sequence[Lease]) -> list[dict[str, Any]]:
    return [
        {
            "token": lease.token,
            "channel": wire.channel_to_json(lease.channel),
            "messages": [wire.message_to_json(m) for m in lease.messages],
        }
        for lease in leases
    ]


def wire_results(results: Sequence[Mapping[str, Any]]) -> list[SendResult]:
    """Reported results (`delivery_ids`, the outcome's fields, `started_at`, `finished_at`);
    a bad outcome raises ValidationError naming `results[i]`."""
    return [
        SendResult(
            ids=tuple(int(i) for i in doc["delivery_ids"]),
            outcome=wire.outcome_from_json(dict(doc), f"results[{index}]"),
            started_at=utc_instant(doc["started_at"], f"results[{index}].started_at"),
            finished_at=utc_instant(doc["finished_at"], f"results[{index}].finished_at"),
        )
        for index, doc in enumerate(results)
    ]
