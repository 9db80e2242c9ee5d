"""`/v1/channels`: manage channels (secrets redacted on every read) and send test messages."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response

from tidings.api.schemas import (
    MAX_ID,
    BreakerList,
    BreakerOut,
    ChannelIn,
    ChannelList,
    ChannelOut,
    ChannelPatch,
    ChannelSaved,
    RotateSecretIn,
    RotateSecretOut,
    TestOut,
)
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, attempt_status
from tidings.service import Service

router = APIRouter(prefix="/v1/channels", tags=["channels"])
ServiceDep = Annotated[Service, Depends(service_of)]
ChannelId = Annotated[int, Path(ge=1, le=MAX_ID)]
ADMIN = [Depends(require(Scope.ADMIN))]
READ = [Depends(require(Scope.READ))]


#: The most channels one page of the list may ask for.
MAX_CHANNELS_PER_PAGE = 1000


@router.get("", response_model=ChannelList, dependencies=READ)
async def list_channels(
    service: ServiceDep,
    limit: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_CHANNELS_PER_PAGE,
            description="Channels on one page, in id order (default: every channel at once)",
        ),
    ] = None,
    after: Annotated[
        int,
        Query(ge=0, le=MAX_ID, description="Start after this channel id: a page's next_after"),
    ] = 0,
    q: Annotated[
        str | None,
        Query(max_length=100, description="Only channels whose name holds this (any case)"),
    ] = None,
) -> dict[str, Any]:
    """The channels in id order. With ten thousand of them the whole list is megabytes:
    `limit` pages it, `next_after` (null on the last page) gives the next page's `after`."""
    if limit is None and not after and not q:
        return {"items": [service.channel_json(c) for c in await service.channels()]}
    size = limit or MAX_CHANNELS_PER_PAGE
    found = await service.channels_page(after, size + 1, q.strip() if q else None)
    page = found[:size]
    more = len(found) > size
    return {
        "items": [service.channel_json(c) for c in page],
        "next_after": page[-1].id if more else None,
    }


@router.get("/health", response_model=BreakerList, dependencies=READ)
async def list_breakers(service: ServiceDep) -> dict[str, Any]:
    """Every channel's circuit breaker (H1): closed, open (rows wait) or half_open (probing)."""
    return {"items": await service.breakers()}


@router.get("/{channel_id:int}/health", response_model=BreakerOut, dependencies=READ)
async def get_breaker(channel_id: ChannelId, service: ServiceDep) -> dict[str, Any]:
    return await service.breaker(channel_id)


@router.post("", status_code=201, response_model=ChannelSaved, dependencies=ADMIN)
async def create_channel(body: ChannelIn, service: ServiceDep) -> dict[str, Any]:
    fields = body.model_dump(exclude_none=True)
    return await _saved(service, await service.create_channel(fields))


@router.get("/{channel_id:int}", response_model=ChannelOut, dependencies=READ)
async def get_channel(channel_id: ChannelId, service: ServiceDep) -> dict[str, Any]:
    return service.channel_json(await service.channel(channel_id))


@router.patch("/{channel_id:int}", response_model=ChannelSaved, dependencies=ADMIN)
async def update_channel(
    channel_id: ChannelId, body: ChannelPatch, service: ServiceDep
) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    return await _saved(service, await service.update_channel(channel_id, changes))


async def _saved(service: Service, channel: Channel) -> dict[str, Any]:
    return service.channel_json(channel) | {"warnings": await service.channel_warnings(channel)}


@router.delete("/{channel_id:int}", status_code=204, dependencies=ADMIN)
async def delete_channel(channel_id: ChannelId, service: ServiceDep) -> Response:
    await service.delete_channel(channel_id)
    return Response(status_code=204)


@router.post("/{channel_id:int}/enable", response_model=ChannelOut, dependencies=ADMIN)
async def enable_channel(channel_id: ChannelId, service: ServiceDep) -> dict[str, Any]:
    return service.channel_json(await service.enable_channel(channel_id))


@router.post("/{channel_id:int}/disable", response_model=ChannelOut, dependencies=ADMIN)
async def disable_channel(channel_id: ChannelId, service: ServiceDep) -> dict[str, Any]:
    """Disable; its pending deliveries become skipped (C7)."""
    await service.disable_channel(channel_id, "disabled through the API")
    return service.channel_json(await service.channel(channel_id))


@router.post("/{channel_id:int}/test", response_model=TestOut, dependencies=ADMIN)
async def test_channel(channel_id: ChannelId, service: ServiceDep) -> dict[str, Any]:
    """Send a test message now and return the classified outcome."""
    outcome = await service.test_channel(channel_id)
    return {
        "outcome": attempt_status(outcome).value,
        "error": None if isinstance(outcome, Delivered) else outcome.error,
        "provider_response": outcome.provider_response,
    }


@router.post("/{channel_id:int}/rotate-secret", response_model=RotateSecretOut, dependencies=ADMIN)
async def rotate_secret(
    channel_id: ChannelId,
    service: ServiceDep,
    response: Response,
    body: RotateSecretIn | None = None,
) -> dict[str, Any]:
    """A new signing secret, shown once; the old one keeps signing for `grace_s` (24 h by
    default), as a second signature, so receivers switch without a gap."""
    grace_s = body.grace_s if body is not None else RotateSecretIn().grace_s
    rotated = await service.rotate_signing_secret(channel_id, grace_s)
    response.headers["Cache-Control"] = "no-store"
    return {
        "secret": rotated.secret,
        "previous_secret_until": rotated.previous_until,
        "channel": service.channel_json(rotated.channel),
    }
