"""`/v1/worker/lease` and `/v1/worker/report`: remote workers without database credentials (W4).

A worker's token needs the admin scope: a lease hands it channel secrets to send with.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tidings.api.schemas import LeaseIn, LeaseOut, ReportIn, ReportOut
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.dispatch import wire
from tidings.dispatch.leasing import Capabilities, apply_report, lease_work
from tidings.dispatch.report import SendResult
from tidings.service import Service

router = APIRouter(
    prefix="/v1/worker", tags=["worker"], dependencies=[Depends(require(Scope.ADMIN))]
)
ServiceDep = Annotated[Service, Depends(service_of)]


@router.post("/lease", response_model=LeaseOut)
async def lease(body: LeaseIn, service: ServiceDep) -> dict[str, Any]:
    """Claim and render due messages matching the worker's kinds and tenants."""
    leases = await lease_work(
        service.hub.store,
        service.registry,
        worker_id=body.worker_id,
        capabilities=Capabilities(
            kinds=set(body.kinds) if body.kinds is not None else None,
            tenants=set(body.tenants) if body.tenants is not None else None,
        ),
        max_messages=body.max_messages,
        lease_s=service.lease_s,
        rand=random.random,
    )
    return {
        "leases": [
            {
                "token": item.token,
                "channel": wire.channel_to_json(item.channel),
                "messages": [wire.message_to_json(m) for m in item.messages],
            }
            for item in leases
        ],
        "lease_s": service.lease_s,
    }


@router.post("/report", response_model=ReportOut)
async def report(body: ReportIn, service: ServiceDep) -> dict[str, Any]:
    """Record what the worker's sends did; fenced by the lease token (C3)."""
    results = [
        SendResult(
            ids=tuple(r.delivery_ids),
            outcome=wire.outcome_from_json(r.model_dump(), f"results[{i}]"),
            started_at=_utc(r.started_at),
            finished_at=_utc(r.finished_at),
        )
        for i, r in enumerate(body.results)
    ]
    recorded, fenced = await apply_report(
        service.hub.store,
        token=body.token,
        worker_id=body.worker_id,
        results=results,
        rand=random.random,
    )
    return {"recorded": recorded, "fenced": fenced}


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
