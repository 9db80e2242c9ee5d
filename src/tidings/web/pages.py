"""Page rendering: one autoescaping Jinja2 environment for the UI's own templates (messages are
rendered by `tidings.render`, never here), its filters, and small URL helpers."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.templating import Jinja2Templates

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
PREFIX = "/ui"

NAV = [
    ("dashboard", "Dashboard", f"{PREFIX}/"),
    ("deliveries", "Deliveries", f"{PREFIX}/deliveries"),
    ("channels", "Channels", f"{PREFIX}/channels"),
    ("inbox", "Inbox", f"{PREFIX}/inbox"),
    ("tokens", "Tokens", f"{PREFIX}/tokens"),
]


def timestamp(value: datetime | str | None) -> str:
    """A time as the UI shows it; ISO 8601 text (an API view's field) is read first."""
    if value is None:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def short_timestamp(value: datetime | None) -> str:
    """Month, day and time (UTC): a list's column, with the full time in its title."""
    return "—" if value is None else value.astimezone(UTC).strftime("%m-%d %H:%M:%S")


def iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat()


def age(value: datetime | None, now: datetime | None = None) -> str:
    """A short, human age: `42s`, `5m 3s`, `2h 10m`, `3d 4h`."""
    if value is None:
        return "—"
    seconds = max(0, int(((now or datetime.now(UTC)) - value).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def duration(ms: int | None) -> str:
    if ms is None:
        return "—"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def static(name: str) -> str:
    return f"{PREFIX}/static/{name}"


def query_url(path: str, params: Mapping[str, object], **changes: object) -> str:
    """`path` with the given query, minus empty values: pagination and filter links."""
    merged = {**params, **changes}
    kept = {k: str(v) for k, v in merged.items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every value from events, providers and errors is escaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        ts=timestamp, short_ts=short_timestamp, iso=iso, age=age, duration=duration, number=number
    )
    env.globals.update(static=static, ui=PREFIX, nav=NAV, query_url=query_url)
    return env


templates = Jinja2Templates(env=environment())


def render(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("admin", None)
    context.setdefault("section", "")
    context.setdefault("now", datetime.now(UTC))
    return templates.TemplateResponse(request, name, context, status_code=code)


def redirect(path: str) -> RedirectResponse:
    """After a POST: 303, so a reload does not repeat it."""
    return RedirectResponse(path, status_code=303)


def local_path(value: str | None, fallback: str) -> str:
    """A redirect target only if it stays inside the UI (no open redirects)."""
    if value and value.startswith(f"{PREFIX}/") and not value.startswith("//"):
        return value
    return fallback
