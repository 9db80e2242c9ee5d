"""`/v1/worker/lease` and `/v1/worker/report`: remote workers without database credentials (W4).

A worker's token needs the admin scope: a lease hands it channel secrets to send with.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tidings.api.schemas import LeaseIn, LeaseOut, ReportIn, ReportOut
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.service import Service

router = APIRouter(
    prefix="/v1/worker", tags=["worker"], dependencies=[Depends(require(Scope.ADMIN))]
)
ServiceDep = Annotated[Service, Depends(service_of)]


@router.post("/lease", response_model=LeaseOut)
async def lease(body: LeaseIn, service: ServiceDep) -> dict[str, Any]:
    """Claim and render due messages matching the worker's kinds and tenants."""
    return await service.lease_work(body.worker_id, body.kinds, body.tenants, body.max_messages)


@router.post("/report", response_model=ReportOut)
async def report(body: ReportIn, service: ServiceDep) -> dict[str, Any]:
    """Record what the worker's sends did; fenced by the lease token (C3)."""
    results = [r.model_dump() for r in body.results]
    return await service.report_work(body.token, body.worker_id, results)
