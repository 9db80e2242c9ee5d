"""The admin UI in process: httpx talks ASGI to the real app over a real database (both
backends, through the `hub` fixture)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

import tidings
from tidings.server import create_app
from tidings.service import Service

BASE = "http://tidings.test"
SAME_ORIGIN = {"Origin": BASE}


@dataclass
class Ui:
    client: httpx.AsyncClient
    service: Service
    admin_token: str
    read_token: str

    async def login(self, token: str | None = None) -> httpx.Response:
        return await self.client.post(
            "/ui/login", data={"token": token or self.admin_token}, headers=SAME_ORIGIN
        )

    async def post(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        return await self.client.post(path, data=data or {}, headers=SAME_ORIGIN)


@pytest.fixture
async def ui(hub: tidings.Hub) -> AsyncIterator[Ui]:
    service = Service(hub)
    admin, _ = await service.create_token("ops-admin", ["admin"])
    read, _ = await service.create_token("reader", ["read"])
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield Ui(client, service, admin, read)


@pytest.fixture
async def logged_in(ui: Ui) -> Ui:
    response = await ui.login()
    assert response.status_code == 303, response.text
    return ui
