"""The event page: one event, its deliveries, and — when it has none — that no channel
matched it (a publish that reached no one is said, not silent)."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.core.errors import NotFound
from tidings.web.history import MAX_ID
from tidings.web.pages import render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()


@router.get("/events/{event_id:int}", response_class=HTMLResponse)
async def event(request: Request, event_id: int, admin: Admin, service: ServiceDep) -> Response:
    if event_id > MAX_ID:
        raise NotFound("event", event_id)
    found = await service.event(event_id)
    channels = await service.channel_refs()
    return render(
        request,
        "event.html",
        admin=admin,
        section="deliveries",
        event=found.event,
        event_data=json.dumps(found.event.data, indent=2, ensure_ascii=False, sort_keys=True),
        deliveries=found.deliveries,
        names={c.id: c.name for c in channels},
        channel_count=len(channels),
    )
