"""`/v1/deliveries`: history (M2), one delivery with its attempts, and resend (M1)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query

from tidings import views
from tidings.api.schemas import (
    MAX_ID,
    DeliveryDetailOut,
    DeliveryPage,
    ErrorOut,
    ReplayIn,
    ReplayOut,
    ResendOut,
    State,
)
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.core import validate
from tidings.core.instant import utc_instant
from tidings.core.model import DeliveryQuery, ReplayQuery
from tidings.core.states import Failure
from tidings.core.states import State as DeliveryState
from tidings.service import Service, TokenInfo

router = APIRouter(prefix="/v1/deliveries", tags=["deliveries"])
ServiceDep = Annotated[Service, Depends(service_of)]
DeliveryId = Annotated[int, Path(ge=1, le=MAX_ID)]
# M2 reads out-of-range paging as the defaults, so any whole number is accepted here.
Paging = Annotated[int | None, Query(ge=-(2**31), le=2**31)]


def _utc(value: datetime | None, field: str) -> datetime | None:
    return None if value is None else utc_instant(value, field)


@router.get(
    "",
    response_model=DeliveryPage,
    dependencies=[Depends(require(Scope.READ))],
    responses={400: {"model": ErrorOut, "description": "a cursor not from a history answer"}},
)
async def list_deliveries(
    service: ServiceDep,
    channel_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    state: State | None = None,
    event_kind: Annotated[str | None, Query(max_length=200)] = None,
    tenant: Annotated[str | None, Query(max_length=200)] = None,
    since: datetime | None = None,
    until: datetime | None = None,
    page: Paging = None,
    page_size: Paging = None,
    # No length limit here: a long cursor is a bad cursor (400), like any other.
    cursor: str | None = None,
) -> dict[str, Any]:
    """Newest first; `page_size` outside 1..200 reads as 50 and `page` < 1 as 1. `cursor`
    (an answer's `next_cursor` or `prev_cursor`) reads that page instead of `page`, as fast at
    any depth; a cursor not from an answer is a 400. `total` is exact up to 10,000 rows and an
    estimate beyond (`total_is_estimate`)."""
    query = DeliveryQuery(
        channel_id=channel_id,
        state=DeliveryState(state) if state else None,
        event_kind=validate.filter_text("event_kind", event_kind),
        tenant=validate.filter_text("tenant", tenant),
        since=_utc(since, "since"),
        until=_utc(until, "until"),
    )
    return views.delivery_page(await service.deliveries(query, page, page_size, cursor))


@router.get(
    "/{delivery_id:int}",
    response_model=DeliveryDetailOut,
    dependencies=[Depends(require(Scope.READ))],
)
async def get_delivery(delivery_id: DeliveryId, service: ServiceDep) -> dict[str, Any]:
    return views.delivery_detail(await service.delivery(delivery_id))


@router.post("/resend", response_model=ReplayOut)
async def replay(
    body: ReplayIn,
    service: ServiceDep,
    token: Annotated[TokenInfo, Depends(require(Scope.ADMIN))],
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> dict[str, Any]:
    """M3: requeue the ended deliveries a filter matches, at most 10,000 per request (oldest
    first; `next_after_id` pages on), each audited; `dry_run` only counts. Requeuing needs an
    `Idempotency-Key`: the same key requeues once."""
    query = ReplayQuery(
        states=frozenset(DeliveryState(s) for s in body.states),
        channel_id=body.channel_id,
        failure=Failure(body.failure) if body.failure else None,
        event_kind=body.event_kind,
        tenant=body.tenant,
        since=_utc(body.since, "since"),
        until=_utc(body.until, "until"),
        after_id=body.after_id,
    )
    done = await service.replay(query, f"token:{token.name}", idempotency_key, dry_run=body.dry_run)
    return asdict(done)


@router.post("/{delivery_id:int}/resend", response_model=ResendOut)
async def resend(
    delivery_id: DeliveryId,
    service: ServiceDep,
    token: Annotated[TokenInfo, Depends(require(Scope.ADMIN))],
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> dict[str, Any]:
    """Requeue a failed or skipped delivery; the same Idempotency-Key requeues once."""
    result = await service.resend(delivery_id, f"token:{token.name}", idempotency_key)
    return {"delivery": views.delivery(result.delivery), "requeued": result.requeued}
