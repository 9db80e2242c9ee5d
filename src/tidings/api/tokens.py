"""`/v1/tokens` (admin): create, list and revoke API tokens (S5). A token's value is in the
answer that creates it and nowhere else; lists show names, scopes, use and expiry."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Response
from pydantic import BaseModel, Field

from tidings import views
from tidings.api.schemas import MAX_ID, Strict
from tidings.api.security import require, service_of
from tidings.auth import Scope
from tidings.core.duration import MAX_S
from tidings.service import Service

router = APIRouter(
    prefix="/v1/tokens", tags=["tokens"], dependencies=[Depends(require(Scope.ADMIN))]
)
ServiceDep = Annotated[Service, Depends(service_of)]
TokenId = Annotated[int, Path(ge=1, le=MAX_ID)]
ScopeName = Literal["publish", "read", "admin", "worker"]
Names = list[Annotated[str, Field(min_length=1, max_length=200)]]


class TokenIn(Strict):
    name: str = Field(min_length=1, max_length=100)
    scopes: list[ScopeName] = Field(min_length=1, max_length=4)
    expires_in_s: float | None = Field(
        default=None, gt=0, le=MAX_S, description="Seconds until the token stops working"
    )
    kinds: Names | None = Field(
        default=None, max_length=1000, description="worker only: the kinds it may ever lease"
    )
    tenants: Names | None = Field(
        default=None, max_length=1000, description="worker only: the tenants it may ever lease"
    )


class TokenOut(BaseModel):
    id: int
    name: str
    scopes: list[str]
    state: Literal["active", "expired", "revoked"]
    created_at: str
    last_used_at: str | None
    expires_at: str | None
    revoked_at: str | None
    kinds: list[str] | None
    tenants: list[str] | None


class NewTokenOut(TokenOut):
    token: str = Field(description="The token itself: shown in this answer only")


class TokenList(BaseModel):
    items: list[TokenOut]


@router.get("", response_model=TokenList)
async def list_tokens(service: ServiceDep) -> dict[str, Any]:
    return {"items": [views.token(t) for t in await service.access.tokens()]}


@router.post("", status_code=201, response_model=NewTokenOut)
async def create_token(body: TokenIn, service: ServiceDep) -> dict[str, Any]:
    """Create a token; its value is in this answer only."""
    token, info = await service.access.create_token(
        body.name,
        body.scopes,
        expires_in_s=body.expires_in_s,
        kinds=body.kinds,
        tenants=body.tenants,
    )
    return views.token(info) | {"token": token}


@router.delete("/{token_id:int}", status_code=204, response_class=Response)
async def revoke_token(token_id: TokenId, service: ServiceDep) -> Response:
    """Revoke a token at once; the admin UI sessions opened with it end too."""
    await service.access.revoke_token(token_id)
    return Response(status_code=204)
