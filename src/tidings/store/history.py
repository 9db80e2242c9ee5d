"""Reading history (M2): filtered, paged delivery lists and one delivery with its attempts."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.engine import Connection

from tidings.core.errors import NotFound
from tidings.core.model import (
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Page,
    PublishResult,
    coerce_page,
)
from tidings.store import rows
from tidings.store.schema import attempts, channels, deliveries, events

d = deliveries
_JOINED = d.join(channels, channels.c.id == d.c.channel_id).join(
    events, events.c.id == d.c.event_id
)


def list_deliveries(
    conn: Connection, query: DeliveryQuery, page: int | None, page_size: int | None
) -> Page[DeliveryView]:
    used_page, used_size = coerce_page(page, page_size)
    conditions = _conditions(query)
    total = conn.scalar(select(func.count()).select_from(_JOINED).where(*conditions)) or 0
    stmt: Select[Any] = (
        select(*rows.VIEW_COLUMNS)
        .select_from(_JOINED)
        .where(*conditions)
        .order_by(d.c.id.desc())
        .limit(used_size)
        .offset((used_page - 1) * used_size)
    )
    items = [rows.delivery_view(r) for r in conn.execute(stmt).mappings()]
    return Page(items=items, total=total, page=used_page, page_size=used_size)


def _conditions(query: DeliveryQuery) -> list[ColumnElement[bool]]:
    found: list[ColumnElement[bool]] = []
    if query.channel_id is not None:
        found.append(d.c.channel_id == query.channel_id)
    if query.state is not None:
        found.append(d.c.state == query.state.value)
    if query.event_kind is not None:
        found.append(events.c.kind == query.event_kind)
    if query.tenant is not None:
        found.append(events.c.tenant == query.tenant)
    if query.since is not None:
        found.append(d.c.created_at >= query.since)
    if query.until is not None:
        found.append(d.c.created_at <= query.until)
    return found


def get_delivery(conn: Connection, delivery_id: int) -> DeliveryDetail:
    row = (
        conn.execute(select(*rows.VIEW_COLUMNS).select_from(_JOINED).where(d.c.id == delivery_id))
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound("delivery", delivery_id)
    log = conn.execute(
        select(attempts).where(attempts.c.delivery_id == delivery_id).order_by(attempts.c.id)
    ).mappings()
    escalated = conn.scalars(
        select(d.c.id).where(d.c.fallback_of == delivery_id).order_by(d.c.id)
    ).all()
    return DeliveryDetail(
        view=rows.delivery_view(row),
        attempts_log=[rows.attempt(r) for r in log],
        escalated_to=list(escalated),
    )


def get_event(conn: Connection, event_id: int) -> PublishResult:
    """The event and its deliveries (`created` is always False: this is a read)."""
    row = conn.execute(select(events).where(events.c.id == event_id)).mappings().first()
    if row is None:
        raise NotFound("event", event_id)
    found = conn.execute(select(d).where(d.c.event_id == event_id).order_by(d.c.id)).mappings()
    return PublishResult(
        event=rows.event(row), deliveries=[rows.delivery(r) for r in found], created=False
    )
