"""Bulk resend: the failed rows of a history filter, counted first, requeued on confirm."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.core.errors import Conflict, NotFound
from tidings.web.forms import Form
from tidings.web.history import read_filters
from tidings.web.pages import render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()
#: One confirmation requeues at most this many rows; the preview says so when more match.
MAX_BULK = 1000


@router.get("/deliveries/resend-failed", response_class=HTMLResponse)
async def preview(request: Request, admin: Admin, service: ServiceDep) -> Response:
    filters = read_filters(request.query_params)
    ids, total = await service.hub.store.failed_ids(filters.query, MAX_BULK)
    return render(
        request,
        "bulk_preview.html",
        admin=admin,
        section="deliveries",
        filters=filters,
        total=total,
        ids=ids,
        limit=MAX_BULK,
        batch_id=uuid.uuid4().hex,
        channels={c.id: c.name for c in await service.hub.channels.list()},
    )


@router.post("/deliveries/resend-failed", response_class=HTMLResponse)
async def confirm(request: Request, admin: Admin, service: ServiceDep) -> Response:
    form = await Form.read(request)
    filters = read_filters(form.as_dict())
    batch_id = form.get("batch_id")[:64] or uuid.uuid4().hex
    ids, total = await service.hub.store.failed_ids(filters.query, MAX_BULK)
    requeued = unchanged = 0
    for delivery_id in ids:
        # One request id per row of this confirmation: submitting it twice requeues once.
        try:
            result = await service.resend(
                delivery_id, f"ui:{admin.name}", f"{batch_id}:{delivery_id}"
            )
        except (Conflict, NotFound):  # it changed since the count; nothing to do
            unchanged += 1
            continue
        requeued += int(result.requeued)
        unchanged += int(not result.requeued)
    return render(
        request,
        "bulk_done.html",
        admin=admin,
        section="deliveries",
        filters=filters,
        requeued=requeued,
        unchanged=unchanged,
        remaining=max(0, total - len(ids)),
    )
