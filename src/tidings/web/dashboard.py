"""The dashboard: deliveries by state, sent and failed attempts per hour over the last day,
and the oldest pending delivery per channel."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.web.charts import hourly_chart
from tidings.web.pages import render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()
SENT_COLOUR = "#2f9e44"
FAILED_COLOUR = "#e03131"


@router.get("/", response_class=HTMLResponse)
async def dashboard(request: Request, admin: Admin, service: ServiceDep) -> Response:
    store = service.hub.store
    buckets = await store.hourly_attempts(24)
    starts = [b.start for b in buckets]
    oldest = sorted(await store.oldest_pending(), key=lambda item: item[1])
    return render(
        request,
        "dashboard.html",
        admin=admin,
        section="dashboard",
        counts=await store.state_counts(),
        sent_chart=hourly_chart("Delivered", SENT_COLOUR, starts, [b.sent for b in buckets]),
        failed_chart=hourly_chart(
            "Failed attempts", FAILED_COLOUR, starts, [b.failed for b in buckets]
        ),
        oldest=oldest,
        channel_count=len(await service.hub.channels.list()),
        now=datetime.now(UTC),
    )
