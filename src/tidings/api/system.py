"""Liveness, readiness (the database answers) and Prometheus metrics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from tidings.api.schemas import Health
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.service import Service

router = APIRouter(tags=["system"])


@router.get("/healthz", response_model=Health)
async def healthz() -> dict[str, Any]:
    return {"status": "ok"}


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(service: Annotated[Service, Depends(service_of)]) -> Any:
    if await service.ready():
        return {"status": "ready"}
    return JSONResponse({"status": "database unreachable"}, status_code=503)


@router.get(
    "/metrics",
    dependencies=[Depends(require(Scope.READ))],
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}},
)
async def metrics(service: Annotated[Service, Depends(service_of)]) -> Response:
    return Response(await service.metrics_text(), media_type="text/plain; version=0.0.4")
