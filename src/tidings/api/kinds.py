"""`/v1/channel-kinds`: every channel kind as it declares itself (config fields, size limit,
flavour, default rate), generated from the adapters' declarations."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tidings import views
from tidings.api.schemas import KindOut
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.service import Service

router = APIRouter(tags=["channels"])


@router.get(
    "/v1/channel-kinds",
    response_model=list[KindOut],
    # Keys a declaration leaves out (a field's default, choices, bounds) stay out, as in
    # `tidings channel kinds --json`.
    response_model_exclude_unset=True,
    dependencies=[Depends(require(Scope.READ))],
)
async def channel_kinds(service: Annotated[Service, Depends(service_of)]) -> list[dict[str, Any]]:
    """The kinds a channel may have and the `config` each one takes. It describes fields
    and holds no values, so no secret can be in it."""
    return views.kinds(service.kind_specs())
