"""`/v1/worker/lease` and `/v1/worker/report`: remote workers without database credentials (W4).

Only `worker` tokens may call them (S5): a lease hands over the channel secrets a send needs,
in its answer only. Each worker token has a ceiling of kinds and tenants fixed at creation,
and what a worker declares is narrowed to it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tidings.api.schemas import LeaseIn, LeaseOut, ReportIn, ReportOut
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.service import Service, TokenInfo

router = APIRouter(prefix="/v1/worker", tags=["worker"])
ServiceDep = Annotated[Service, Depends(service_of)]
Worker = Annotated[TokenInfo, Depends(require(Scope.WORKER))]


@router.post("/lease", response_model=LeaseOut)
async def lease(body: LeaseIn, service: ServiceDep, worker: Worker) -> dict[str, Any]:
    """Claim and render due messages matching the worker's kinds and tenants."""
    return await service.lease_work(
        body.worker_id, body.kinds, body.tenants, body.max_messages, worker=worker
    )


@router.post("/report", response_model=ReportOut)
async def report(body: ReportIn, service: ServiceDep, worker: Worker) -> dict[str, Any]:
    """Record what the worker's sends did; fenced by the lease token (C3)."""
    results = [r.model_dump() for r in body.results]
    return await service.report_work(body.token, body.worker_id, results, worker=worker)
