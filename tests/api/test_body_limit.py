"""S6: bodies over the limit are refused (413) before auth and routing, on every route: from
their Content-Length without reading them, or as they stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.types import Message

from tests.api.conftest import Api
from tidings.api.bodylimit import MAX_BATCH_BYTES, MAX_BODY_BYTES

OVER = b"x" * (MAX_BODY_BYTES + 1)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/events"),  # no token: 413 comes before 401
        ("POST", "/v1/nope/batch"),  # any path ending /batch used to buffer 32 MiB, then 404
        ("POST", "/v1/channels/1/test/batch"),
        ("PUT", "/v1/anything"),
        ("GET", "/v1/deliveries"),
        ("DELETE", "/v1/tokens/1"),
        ("POST", "/ui/login"),
    ],
)
async def test_every_route_refuses_a_body_over_the_limit(api: Api, method: str, path: str) -> None:
    response = await api.client.request(method, path, content=OVER)
    assert response.status_code == 413, (method, path, response.status_code)
    assert response.json()["error"]["code"] == "too_large"


async def test_only_the_batch_route_takes_more(api: Api) -> None:
    response = await api.client.post("/v1/events/batch", content=OVER, headers=api.publish)
    assert response.status_code == 422  # read, then refused as JSON, not for its size


async def test_a_declared_length_is_refused_without_reading_the_body(api: Api) -> None:
    sent: list[Message] = []

    async def receive() -> Message:
        raise AssertionError("the body was read")

    async def send(message: Message) -> None:
        sent.append(message)

    for path, declared in (
        ("/v1/events", str(MAX_BODY_BYTES + 1).encode()),
        ("/v1/events/batch", str(MAX_BATCH_BYTES + 1).encode()),
        # "²".isdigit() is true and int("²") raises: such a length was a 500.
        ("/v1/events", "²".encode("latin-1")),
        ("/v1/events", "¹²".encode("latin-1")),
    ):
        sent.clear()
        await api.app(_post(path, declared), receive, send)
        assert sent[0]["status"] == 413, (path, declared)


async def test_a_streamed_body_is_cut_off_at_the_limit(api: Api) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(64):
            yield b"y" * 8192  # 512 KiB in all, without a Content-Length

    response = await api.client.post("/v1/events", content=chunks(), headers=api.publish)
    assert response.status_code == 413


def _post(path: str, content_length: bytes) -> dict[str, Any]:
    """The ASGI scope of a POST to `path` that declares `content_length`."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"tidings.test"), (b"content-length", content_length)],
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 80),
    }
