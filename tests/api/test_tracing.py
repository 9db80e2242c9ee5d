"""Tracing: publish, claim, render and send are spans in the producer's trace (linked by the
event's traceparent), and a webhook carries the send's traceparent on to the receiver."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tidings
from tests.api.conftest import Api
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Sink
from tidings import tracing

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = CALLER.split("-")[1]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.use(None)


async def test_a_publish_over_http_is_traced_to_the_receiver(
    api: Api, sink: Sink, spans: InMemorySpanExporter
) -> None:
    hub = api.service.hub
    await webhook(hub, sink.url("/hook"))
    async with running(hub):
        answer = await api.client.post(
            "/v1/events",
            json={"kind": "a.b", "subject": "s"},
            headers=api.publish | {"traceparent": CALLER},
        )
        assert answer.status_code == 201, answer.text
        await settled(hub, 1)
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert {"tidings.publish", "tidings.claim", "tidings.render", "tidings.send"} <= set(by_name)
    publish, send = by_name["tidings.publish"], by_name["tidings.send"]
    assert f"{publish.context.trace_id:032x}" == TRACE_ID  # the caller's trace
    assert send.context.trace_id == publish.context.trace_id
    assert send.parent is not None
    assert send.parent.span_id == publish.context.span_id
    assert by_name["tidings.render"].parent.span_id == send.context.span_id
    assert by_name["tidings.claim"].links[0].context.trace_id == publish.context.trace_id
    assert send.attributes["tidings.outcome"] == "delivered"
    (received,) = sink.requests("/hook")
    assert received.headers["traceparent"] == f"00-{TRACE_ID}-{send.context.span_id:016x}-01"
    event = (await hub.get_event(answer.json()["event"]["id"])).event
    assert event.traceparent == f"00-{TRACE_ID}-{publish.context.span_id:016x}-01"


async def test_tracing_off_sends_no_traceparent_and_an_invalid_one_is_ignored(
    api: Api, sink: Sink
) -> None:
    hub = api.service.hub
    await webhook(hub, sink.url("/hook"))
    async with running(hub):
        answer = await api.client.post(
            "/v1/events",
            json={"kind": "a.b", "subject": "s"},
            headers=api.publish | {"traceparent": "not-a-trace"},
        )
        assert answer.status_code == 201
        await settled(hub, 1)
    (received,) = sink.requests("/hook")
    assert "traceparent" not in received.headers
    with pytest.raises(tidings.ValidationError):
        await hub.publish(kind="a.b", subject="s", traceparent="nope")


# OpenTelemetry's global provider can be set once per process: these run in a process each.
GLOBAL_PROVIDER_LATER = """
import time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from tidings import tracing

assert not tracing.active()
trace.set_tracer_provider(TracerProvider())
deadline = time.monotonic() + 10
while not tracing.active():
    assert time.monotonic() < deadline, "a global provider set later was never seen"
    time.sleep(0.01)
assert tracing.active()
print("seen")
"""


def test_a_global_provider_set_after_a_look_is_seen() -> None:
    """`active()` keeps its "no" for a moment (it is asked several times a send), never
    for good: a library user may set OpenTelemetry's global provider at any time."""
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER_LATER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "seen"
