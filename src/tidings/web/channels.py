"""Channel pages: the list with health, the create and edit forms per kind, enable / disable,
and "send test" with the classified outcome."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings.core.errors import NotFound, TidingsError
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, attempt_status
from tidings.core.text import ascii_digits
from tidings.service import DEFAULT_GRACE_S, Service, TokenInfo, rotatable
from tidings.web import channel_form
from tidings.web.forms import Form
from tidings.web.history import MAX_ID
from tidings.web.pages import PREFIX, redirect, render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()


#: Channels on one page of the list: with ten thousand of them, the whole list was 8 MB of
#: HTML and its health read every delivery ever stored.
CHANNELS_PER_PAGE = 100


@router.get("/channels", response_class=HTMLResponse)
async def channel_list(request: Request, admin: Admin, service: ServiceDep) -> Response:
    q = request.query_params
    after = _id_or_zero(q.get("after"))
    search = q.get("q", "").strip()[:100] or None
    found = await service.channels_page(after, CHANNELS_PER_PAGE + 1, search)
    channels, more = found[:CHANNELS_PER_PAGE], len(found) > CHANNELS_PER_PAGE
    raw = q.get("notice", "")
    noticed = await _noticed_channel(raw, service)
    return render(
        request,
        "channels.html",
        admin=admin,
        section="channels",
        channels=channels,
        health=await service.channel_health([c.id for c in channels]),
        breakers={b["channel_id"]: b for b in await service.breakers()},
        kinds=service.kinds(),
        notice=_notice(raw, noticed),
        warnings=await service.channel_warnings(noticed) if _was_saved(raw) and noticed else [],
        search=search or "",
        first_page=after == 0,
        next_after=channels[-1].id if more else None,
    )


def _id_or_zero(raw: str | None) -> int:
    return int(raw) if raw and ascii_digits(raw) and int(raw) <= MAX_ID else 0


NOTICES = {
    "created": "Channel {} created.",
    "saved": "Channel {} saved.",
    "enabled": "Channel {} enabled.",
    "disabled": "Channel {} disabled; its pending deliveries were skipped.",
}


async def _noticed_channel(raw: str, service: Service) -> Channel | None:
    """The stored channel a notice names (the query string only says which), wherever it
    falls in the list; None for none, or one that no longer exists."""
    action, _, ident = raw.partition(":")
    if action not in NOTICES or not ascii_digits(ident) or int(ident) > MAX_ID:
        return None
    try:
        return await service.channel(int(ident))
    except NotFound:
        return None


def _notice(raw: str, noticed: Channel | None) -> str:
    """A fixed sentence per action (the query string only picks which one, and the channel)."""
    if noticed is None:
        return ""
    return NOTICES[raw.partition(":")[0]].format(repr(noticed.name))


def _was_saved(raw: str) -> bool:
    """After a save, what would make the saved channel's sends fail is said (checked now,
    from the stored channel)."""
    return raw.partition(":")[0] in ("created", "saved")


@router.get("/channels/new", response_class=HTMLResponse)
async def new_channel(request: Request, admin: Admin, service: ServiceDep) -> Response:
    kinds = service.kinds()
    kind = request.query_params.get("kind", "")
    kind = kind if kind in kinds else ("webhook" if "webhook" in kinds else kinds[0])
    values = {"mode": "realtime", "enabled": "1"}
    return await _form(request, admin, service, kind, None, values)


@router.post("/channels/new", response_class=HTMLResponse)
async def create_channel(request: Request, admin: Admin, service: ServiceDep) -> Response:
    form = (await Form.read(request)).as_dict()
    kind = form.get("kind", "")
    try:
        fields = channel_form.spec_from_form(_kind_form(service, kind), form, None)
        fields["kind"] = kind
        fields["enabled"] = form.get("enabled") == "1"
        channel = await service.create_channel(fields)
    except TidingsError as error:
        return await _form(request, admin, service, kind, None, form, error.message, error.status)
    return redirect(f"{PREFIX}/channels?notice=created:{channel.id}")


@router.get("/channels/{channel_id:int}/edit", response_class=HTMLResponse)
async def edit_channel(
    request: Request, channel_id: int, admin: Admin, service: ServiceDep
) -> Response:
    channel = await _channel(service, channel_id)
    values = channel_form.values_of(channel, _kind_form(service, channel.kind))
    return await _form(request, admin, service, channel.kind, channel, values)


@router.post("/channels/{channel_id:int}/edit", response_class=HTMLResponse)
async def update_channel(
    request: Request, channel_id: int, admin: Admin, service: ServiceDep
) -> Response:
    channel = await _channel(service, channel_id)
    form = (await Form.read(request)).as_dict()
    try:
        changes = channel_form.spec_from_form(_kind_form(service, channel.kind), form, channel)
        await service.update_channel(channel_id, changes)
    except TidingsError as error:
        return await _form(request, admin, service, channel.kind, channel, form, error.message, 422)
    return redirect(f"{PREFIX}/channels?notice=saved:{channel_id}")


@router.post("/channels/{channel_id:int}/enable")
async def enable(channel_id: int, _admin: Admin, service: ServiceDep) -> Response:
    await _channel(service, channel_id)
    await service.enable_channel(channel_id)
    return redirect(f"{PREFIX}/channels?notice=enabled:{channel_id}")


@router.post("/channels/{channel_id:int}/disable")
async def disable(channel_id: int, admin: Admin, service: ServiceDep) -> Response:
    """Its pending deliveries become skipped (C7)."""
    await _channel(service, channel_id)
    await service.disable_channel(channel_id, f"disabled in the admin UI by {admin.name}")
    return redirect(f"{PREFIX}/channels?notice=disabled:{channel_id}")


@router.post("/channels/{channel_id:int}/test", response_class=HTMLResponse)
async def send_test(
    request: Request, channel_id: int, admin: Admin, service: ServiceDep
) -> Response:
    channel = await _channel(service, channel_id)
    outcome = await service.test_channel(channel_id)
    return render(
        request,
        "channel_test.html",
        admin=admin,
        section="channels",
        channel=channel,
        status=attempt_status(outcome).value,
        error=None if isinstance(outcome, Delivered) else outcome.error,
        provider_response=outcome.provider_response,
    )


@router.post("/channels/{channel_id:int}/rotate-secret", response_class=HTMLResponse)
async def rotate_secret(
    request: Request, channel_id: int, admin: Admin, service: ServiceDep
) -> Response:
    """A new signing secret, shown once on a page no cache keeps; the old one signs beside
    it for the grace period."""
    channel = await _channel(service, channel_id)
    form = (await Form.read(request)).as_dict()
    try:
        grace_s = float(form.get("grace_s") or DEFAULT_GRACE_S)
        rotated = await service.rotate_signing_secret(channel_id, grace_s)
    except (ValueError, TidingsError) as error:
        message = error.message if isinstance(error, TidingsError) else "grace_s: not a number"
        values = channel_form.values_of(channel, _kind_form(service, channel.kind))
        return await _form(request, admin, service, channel.kind, channel, values, message, 422)
    page = render(
        request,
        "channel_secret.html",
        admin=admin,
        section="channels",
        channel=rotated.channel,
        secret=rotated.secret,
        until=rotated.previous_until,
    )
    page.headers["Cache-Control"] = "no-store"
    return page


async def _channel(service: Service, channel_id: int) -> Channel:
    if channel_id > MAX_ID:
        raise NotFound("channel", channel_id)
    return await service.channel(channel_id)


def _kind_form(service: Service, kind: str) -> channel_form.KindForm:
    return channel_form.KindForm.of(service.kind_spec(kind))


async def _form(
    request: Request,
    admin: TokenInfo,
    service: Service,
    kind: str,
    channel: Channel | None,
    values: dict[str, Any],
    error: str | None = None,
    status: int = 200,
) -> Response:
    form = _kind_form(service, kind)
    others = [c for c in await service.channels() if channel is None or c.id != channel.id]
    return render(
        request,
        "channel_form.html",
        status,
        admin=admin,
        section="channels",
        kind=kind,
        kinds=service.kinds(),
        channel=channel,
        config_fields=form.fields,
        secrets=form.secrets,
        placeholders=channel_form.placeholders(channel, form),
        values={k: v for k, v in values.items() if k not in form.secrets},
        rotatable=rotatable(service.kind_spec(kind)),
        modes=channel_form.MODES,
        severities=channel_form.SEVERITIES,
        fallbacks=others,
        error=error,
    )
