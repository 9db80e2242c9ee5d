"""Bulk resend: the failed rows of a history filter, counted first, requeued on confirm."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.service import MAX_BULK_RESEND
from tidings.web.forms import Form
from tidings.web.history import read_filters
from tidings.web.pages import render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()


@router.get("/deliveries/resend-failed", response_class=HTMLResponse)
async def preview(request: Request, admin: Admin, service: ServiceDep) -> Response:
    filters = read_filters(request.query_params)
    ids, total = await service.failed_deliveries(filters.query, MAX_BULK_RESEND)
    return render(
        request,
        "bulk_preview.html",
        admin=admin,
        section="deliveries",
        filters=filters,
        total=total,
        ids=ids,
        limit=MAX_BULK_RESEND,
        batch_id=uuid.uuid4().hex,
        channels={c.id: c.name for c in await service.channel_refs()},
    )


@router.post("/deliveries/resend-failed", response_class=HTMLResponse)
async def confirm(request: Request, admin: Admin, service: ServiceDep) -> Response:
    form = await Form.read(request)
    filters = read_filters(form.as_dict())
    # The preview's batch id: submitting the same confirmation twice requeues each row once.
    batch_id = form.get("batch_id")[:64] or uuid.uuid4().hex
    done = await service.resend_failed(filters.query, f"ui:{admin.name}", batch_id)
    return render(
        request,
        "bulk_done.html",
        admin=admin,
        section="deliveries",
        filters=filters,
        requeued=done.requeued,
        unchanged=done.unchanged,
        remaining=done.remaining,
    )
