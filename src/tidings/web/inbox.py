"""The inbox: messages delivered to `inbox` channels, newest first, as rendered."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.web.history import read_filters
from tidings.web.pages import render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()
SHOWN = 50


@router.get("/inbox", response_class=HTMLResponse)
async def inbox(request: Request, admin: Admin, service: ServiceDep) -> Response:
    channel_id = read_filters(request.query_params).query.channel_id
    channels = await service.channel_refs()
    return render(
        request,
        "inbox.html",
        admin=admin,
        section="inbox",
        messages=await service.inbox(channel_id, SHOWN),
        names={c.id: c.name for c in channels},
        inboxes=[c for c in channels if c.kind == "inbox"],
        channel_id=channel_id,
    )
