"""The remote worker's calls to its server: the bearer token goes to that server only (no
redirects followed), a refused token is a one-line ConfigError, other errors are retried."""

from __future__ import annotations

import pytest

from tests.sink import Answer, Sink
from tidings.channels.registry import Registry
from tidings.core.errors import ConfigError
from tidings.remote import RemoteWorker, ServerUnavailable

TOKEN = "tdg_remote-client-test-token"


def worker(sink: Sink) -> RemoteWorker:
    return RemoteWorker(sink.url(""), TOKEN, Registry([]), worker_id="w")


async def test_a_lease_carries_the_token_and_reads_the_answer(sink: Sink) -> None:
    sink.script("/v1/worker/lease", Answer(200, {"leases": [], "lease_s": 120}))
    answer = await worker(sink)._post("/v1/worker/lease", {"worker_id": "w"})
    assert answer == {"leases": [], "lease_s": 120}
    (request,) = sink.requests("/v1/worker/lease")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.json() == {"worker_id": "w"}


async def test_a_redirect_is_not_followed(sink: Sink) -> None:
    elsewhere = sink.url("/elsewhere")
    sink.script("/v1/worker/lease", Answer(307, "", headers={"Location": elsewhere}))
    with pytest.raises(ServerUnavailable, match="HTTP 307"):
        await worker(sink)._post("/v1/worker/lease", {})
    assert sink.requests("/elsewhere") == []


async def test_errors_say_what_the_server_said(sink: Sink) -> None:
    refused = {"error": {"code": "unauthorized", "message": "unknown or revoked token"}}
    sink.script("/v1/worker/lease", Answer(401, refused), Answer(503, "busy"))
    with pytest.raises(ConfigError, match="unknown or revoked token"):
        await worker(sink)._post("/v1/worker/lease", {})
    with pytest.raises(ServerUnavailable, match="HTTP 503"):
        await worker(sink)._post("/v1/worker/lease", {})
