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
    data = await service.dashboard(24)
    buckets = data.hourly
    starts = [b.start for b in buckets]
    return render(
        request,
        "dashboard.html",
        admin=admin,
        section="dashboard",
        counts=data.counts,
        sent_chart=hourly_chart("Delivered", SENT_COLOUR, starts, [b.sent for b in buckets]),
        failed_chart=hourly_chart(
            "Failed attempts", FAILED_COLOUR, starts, [b.failed for b in buckets]
        ),
        oldest=data.oldest_pending,
        channel_count=data.channel_count,
        now=datetime.now(UTC),
    )
