"""An in-process API over a real database: httpx talks ASGI to the real FastAPI app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

import tidings
from tidings.api import create_app
from tidings.service import Service


@dataclass
class Api:
    client: httpx.AsyncClient
    service: Service
    admin: dict[str, str]
    read: dict[str, str]
    publish: dict[str, str]
    app: FastAPI
    #: A remote worker's token (S5): lease and report only, no ceiling.
    worker: dict[str, str]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def api(hub: tidings.Hub) -> AsyncIterator[Api]:
    service = Service(hub)
    tokens = {}
    for scope in ("admin", "read", "publish", "worker"):
        token, _ = await service.create_token(f"{scope}-token", [scope])
        tokens[scope] = bearer(token)
    app = create_app(service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tidings.test") as client:
        yield Api(
            client,
            service,
            tokens["admin"],
            tokens["read"],
            tokens["publish"],
            app,
            tokens["worker"],
        )
