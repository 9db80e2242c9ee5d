"""Delivery pages: the history list with filters and live refresh, one delivery with its
event, rendered message and attempts, and resend (M1)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.core.cursor import BadCursor
from tidings.core.errors import Conflict, NotFound
from tidings.core.model import Channel, ChannelRef, DeliveryDetail
from tidings.core.states import RESENDABLE
from tidings.core.text import ascii_digits, has_unstorable
from tidings.service import Service
from tidings.web.forms import Form
from tidings.web.history import MAX_ID, page_number, read_filters
from tidings.web.pages import PREFIX, redirect, render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()
RESENDABLE_STATES = frozenset(s.value for s in RESENDABLE)
#: Up to this many channels the filter offers them in a list; beyond, it takes a name or an
#: id typed in (with ten thousand channels the list was 469 KiB of every history page).
CHANNEL_CHOICES_MAX = 200


@router.get("/deliveries", response_class=HTMLResponse)
async def history(request: Request, admin: Admin, service: ServiceDep) -> Response:
    q = request.query_params
    channel, unknown = await _channel_filter(service, q.get("channel", ""))
    filters = read_filters(q if channel is None else {**q, "channel": str(channel.id)})
    if unknown:
        filters.errors.append(unknown)
    page, page_size = page_number(q.get("page")), page_number(q.get("page_size"))
    try:
        result = await service.deliveries(filters.query, page, page_size, q.get("cursor"))
    except BadCursor as error:  # an edited or stale link: the first page, and why
        filters.errors.append(error.message)
        result = await service.deliveries(filters.query, None, page_size)
    pages = max(result.page, -(-result.total // result.page_size))
    context: dict[str, Any] = {
        "admin": admin,
        "section": "deliveries",
        "result": result,
        "pages": pages,
        "filters": filters,
        # For the filter's choices (None: too many, typed in); the live refresh shows none.
        "channels": [] if q.get("partial") else await _channel_choices(service),
        "channel_typed": "" if channel is None else channel.name,
        "resendable": RESENDABLE_STATES,
        "request_id": uuid.uuid4().hex,
        "here": str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
    }
    template = "deliveries_live.html" if q.get("partial") else "deliveries.html"
    return render(request, template, **context)


async def _channel_filter(service: Service, given: str) -> tuple[Channel | None, str | None]:
    """The channel a filter names by name (the typed-in filter); an id is read_filters'.
    And what is wrong with it, if it names none."""
    name = given.strip()
    if not name or ascii_digits(name):
        return None, None
    if has_unstorable(name):
        return None, "channel: must not contain NUL or unpaired surrogates"
    try:
        return await service.channel_by_ref(name[:200]), None
    except NotFound:
        return None, f"channel: no channel is named {name[:200]!r}"


async def _channel_choices(service: Service) -> list[ChannelRef] | None:
    if await service.count_channels() > CHANNEL_CHOICES_MAX:
        return None
    return await service.channel_refs()


@router.get("/deliveries/{delivery_id:int}", response_class=HTMLResponse)
async def delivery(
    request: Request, delivery_id: int, admin: Admin, service: ServiceDep
) -> Response:
    detail = await _detail(service, delivery_id)
    if request.query_params.get("partial"):
        return render(request, "delivery_live.html", **_live_context(detail))
    return await _detail_page(request, admin, service, detail)


@router.post("/deliveries/{delivery_id:int}/resend", response_class=HTMLResponse)
async def resend(request: Request, delivery_id: int, admin: Admin, service: ServiceDep) -> Response:
    form = await Form.read(request)
    request_id = form.get("request_id")[:200] or None
    try:
        result = await service.resend(delivery_id, f"ui:{admin.name}", request_id)
    except Conflict as error:
        detail = await _detail(service, delivery_id)
        return await _detail_page(request, admin, service, detail, error=error.message, status=409)
    outcome = "requeued" if result.requeued else "already"
    return redirect(f"{PREFIX}/deliveries/{delivery_id}?resent={outcome}")


async def _detail(service: Service, delivery_id: int) -> DeliveryDetail:
    if delivery_id > MAX_ID:
        raise NotFound("delivery", delivery_id)
    return await service.delivery(delivery_id)


def _live_context(detail: DeliveryDetail) -> dict[str, Any]:
    return {
        "view": detail.view,
        "d": detail.view.delivery,
        "attempts": detail.attempts_log,
        "escalated_to": detail.escalated_to,
        "resendable": RESENDABLE_STATES,
        "request_id": uuid.uuid4().hex,
    }


async def _detail_page(
    request: Request,
    admin: Any,
    service: Service,
    detail: DeliveryDetail,
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    event = (await service.event(detail.view.delivery.event_id)).event
    return render(
        request,
        "delivery.html",
        status,
        admin=admin,
        section="deliveries",
        event=event,
        event_data=json.dumps(event.data, indent=2, ensure_ascii=False, sort_keys=True),
        rendered=await service.preview(detail.view, event),
        resent=request.query_params.get("resent", ""),
        error=error,
        **_live_context(detail),
    )
