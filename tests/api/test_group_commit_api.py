"""POST /v1/events under concurrency, over real TCP to uvicorn: group commit keeps E1 and E2
per request — stored once with their deliveries, answered only after commit, a refused event
failing alone, a database failure answered cleanly with nothing stored in part."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import text

import tidings
from tests.conftest import count
from tests.faults import DIE, POISON, faults
from tidings.api import create_app
from tidings.service import Service

EVENT = {"kind": "monitor.down", "subject": "web-1", "severity": "high"}
CONCURRENCY = 32


class _Server(uvicorn.Server):
    """Signals left to pytest; `ready` set once it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@dataclass
class Ingest:
    hub: tidings.Hub
    client: httpx.AsyncClient

    async def publish(self, **fields: Any) -> httpx.Response:
        return await self.client.post("/v1/events", json=EVENT | fields)

    async def publish_all(self, many: list[dict[str, Any]]) -> list[httpx.Response]:
        return await asyncio.gather(*(self.publish(**fields) for fields in many))


@pytest.fixture
async def ingest(hub: tidings.Hub) -> AsyncIterator[Ingest]:
    service = Service(hub)
    token, _ = await service.create_token("producer", ["publish"])
    for name in ("a", "b", "c"):
        await hub.channels.create(name=name, kind="inbox")
    config = uvicorn.Config(create_app(service), lifespan="off", log_level="warning")
    server = _Server(config)
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        await server.ready.wait()
        limits = httpx.Limits(max_connections=CONCURRENCY)
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {token}"},
                limits=limits,
                timeout=30,
            ) as client:
                yield Ingest(hub, client)
        finally:
            server.should_exit = True
            await serving


async def test_e1_concurrent_publishes_are_each_stored_once_with_their_deliveries(
    ingest: Ingest,
) -> None:
    answers = await ingest.publish_all([{"title": f"t{i}"} for i in range(3 * CONCURRENCY)])
    assert [a.status_code for a in answers] == [201] * len(answers)
    bodies = [a.json() for a in answers]
    assert [b["event"]["title"] for b in bodies] == [f"t{i}" for i in range(len(answers))]
    assert len({b["event"]["id"] for b in bodies}) == len(answers)
    delivery_ids = {d["id"] for b in bodies for d in b["deliveries"]}
    assert len(delivery_ids) == 3 * len(answers)
    assert await count(ingest.hub, "events") == len(answers)
    assert await count(ingest.hub, "deliveries") == 3 * len(answers)


async def test_e1_each_answer_comes_after_its_event_committed(ingest: Ingest, db_url: str) -> None:
    """Read on another connection pool the moment each answer arrives."""
    seen: list[tuple[int, int]] = []
    async with tidings.Hub(db_url) as other:

        async def publish_then_read(i: int) -> None:
            answer = await ingest.publish(title=f"t{i}")
            event_id = answer.json()["event"]["id"]
            async with other.store.engine.connect() as conn:
                found = await conn.execute(
                    text("SELECT count(*) FROM deliveries WHERE event_id = :id"), {"id": event_id}
                )
                seen.append((event_id, int(found.scalar_one())))

        await asyncio.gather(*(publish_then_read(i) for i in range(2 * CONCURRENCY)))
    assert [n for _, n in seen] == [3] * len(seen)


async def test_e2_idempotency_keys_within_and_across_groups(ingest: Ingest) -> None:
    first = await ingest.publish_all([{"idempotency_key": k} for k in ["k"] * 10 + list("abc")])
    codes = [a.status_code for a in first]
    assert sorted(codes[:10]) == [200] * 9 + [201]
    assert codes[10:] == [201] * 3
    assert len({a.json()["event"]["id"] for a in first[:10]}) == 1
    replayed = [a for a in first[:10] if a.status_code == 200]
    assert all(a.headers["Idempotent-Replayed"] == "true" for a in replayed)
    again = await ingest.publish_all([{"idempotency_key": k} for k in "kabcd"])
    assert [a.status_code for a in again] == [200, 200, 200, 200, 201]
    assert again[0].json()["event"]["id"] == first[0].json()["event"]["id"]
    assert await count(ingest.hub, "events") == 5
    assert await count(ingest.hub, "deliveries") == 15


async def test_e1_a_bad_event_among_concurrent_ones_fails_alone(ingest: Ingest) -> None:
    """One the API refuses (422) and one the database refuses (409), among valid ones."""
    many: list[dict[str, Any]] = [{"title": f"t{i}"} for i in range(CONCURRENCY)]
    many[5] = {"title": POISON}
    many[9] = {"title": "bad", "severity": "apocalyptic"}
    async with faults(ingest.hub):
        answers = await ingest.publish_all(many)
    codes = [a.status_code for a in answers]
    assert (codes[5], codes[9]) == (409, 422)
    assert codes[:5] + codes[6:9] + codes[10:] == [201] * (CONCURRENCY - 2)
    for bad in (answers[5], answers[9]):
        assert set(bad.json()) == {"error"}
        assert "Traceback" not in bad.text
        assert "INSERT" not in bad.text
    assert await count(ingest.hub, "events") == CONCURRENCY - 2
    assert await count(ingest.hub, "deliveries") == 3 * (CONCURRENCY - 2)


async def test_e1_a_database_failure_answers_each_request_cleanly_and_stores_no_part(
    ingest: Ingest,
) -> None:
    many: list[dict[str, Any]] = [{"title": f"t{i}"} for i in range(CONCURRENCY)]
    many[7] = {"title": DIE}
    async with faults(ingest.hub, die=True):
        answers = await ingest.publish_all(many)
    assert answers[7].status_code == 503
    stored = 0
    for answer in answers:
        assert answer.status_code in (201, 503), answer.text
        if answer.status_code == 503:
            assert answer.json()["error"]["code"] == "store"
            assert "Traceback" not in answer.text
        else:
            stored += 1
            assert len(answer.json()["deliveries"]) == 3
    assert await count(ingest.hub, "events") == stored
    assert await count(ingest.hub, "deliveries") == 3 * stored
    assert (await ingest.publish(title="after")).status_code == 201
