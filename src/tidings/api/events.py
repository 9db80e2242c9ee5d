"""`/v1/events`: publish one or many (E1–E3) and read one back."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Response

from tidings import views
from tidings.api.schemas import MAX_ID, BatchIn, BatchOut, EventIn, PublishOut
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.core import jsontext
from tidings.core.model import PublishResult
from tidings.core.validate import valid_traceparent
from tidings.service import Service

#: The caller's W3C trace context (tracing).
TraceParent = Annotated[str | None, Header()]

JSON = "application/json"

router = APIRouter(prefix="/v1/events", tags=["events"])
ServiceDep = Annotated[Service, Depends(service_of)]


@router.post(
    "",
    status_code=201,
    response_model=PublishOut,
    dependencies=[Depends(require(Scope.PUBLISH))],
    responses={200: {"model": PublishOut, "description": "the idempotency key was stored already"}},
)
async def publish(body: EventIn, service: ServiceDep, traceparent: TraceParent = None) -> Response:
    """Publish one event; 201 when new, 200 with the first event for a repeated key (E2).
    A W3C `traceparent` header puts its sends in the caller's trace (an invalid one is
    ignored, as the W3C asks)."""
    fields = body.model_dump() | {"traceparent": valid_traceparent(traceparent)}
    return publish_answer(await service.publish(fields))


def publish_answer(result: PublishResult) -> Response:
    """201 with the event and its deliveries; 200 and `Idempotent-Replayed` for a key stored
    before. Serialized here rather than checked again against PublishOut, on the busiest
    route: views.publish_result has that shape (a test holds them equal)."""
    answer = jsontext.dumps(views.publish_result(result))
    if result.created:
        return Response(answer, 201, media_type=JSON)
    return Response(answer, 200, {"Idempotent-Replayed": "true"}, media_type=JSON)


@router.post(
    "/batch",
    status_code=201,
    response_model=BatchOut,
    dependencies=[Depends(require(Scope.PUBLISH))],
)
async def publish_batch(
    body: BatchIn, service: ServiceDep, traceparent: TraceParent = None
) -> Response:
    """Publish up to 1,000 events in one transaction: all are stored or none."""
    parent = valid_traceparent(traceparent)
    items = [e.model_dump() | {"traceparent": parent} for e in body.events]
    results = await service.publish_batch(items)
    # As publish_answer: serialized as built, not validated again against BatchOut (a
    # thousand results cost more to check than to store).
    answer = jsontext.dumps({"results": [views.publish_result(r) for r in results]})
    return Response(answer, 201, media_type=JSON)


@router.get(
    "/{event_id:int}", response_model=PublishOut, dependencies=[Depends(require(Scope.READ))]
)
async def get_event(
    event_id: Annotated[int, Path(ge=1, le=MAX_ID)], service: ServiceDep
) -> dict[str, Any]:
    """The event and its deliveries."""
    return views.publish_result(await service.event(event_id))
