"""OpenTelemetry spans for publish, claim, render and send, linked by each event's trace context
(the optional `tidings[otel]` extra). Without the extra, or without a configured tracer
provider, every function here is a cheap no-op: the send path pays one check.

An event carries the W3C `traceparent` of the span that published it (a child of the
caller's context, or of the `traceparent` header an API client sent), so its sends appear
in the producer's trace; webhooks carry the send span's `traceparent` on to the receiver.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

from tidings.core.model import Channel, Claim
from tidings.core.outcome import Outcome, attempt_status

#: The OpenTelemetry API modules, imported on first use (so `import tidings` stays light);
#: None until then, False when the extra is not installed.
_otel: Any = None
#: A tracer provider given to tidings alone (`use`); else OpenTelemetry's global one.
_provider: Any = None
#: OpenTelemetry's global provider can be set only once, so once seen it is kept here.
_global_seen = False
#: Until a global provider is seen, it is looked for again at most this often: the look
#: reads `os.environ` (a miss costs ~1 µs), and `active()` is asked several times a send.
GLOBAL_LOOK_S = 0.25
_next_global_look = 0.0

#: At most this many events are linked from one claim's or digest's span.
MAX_LINKS = 128
_TRACER = "tidings"


def _api() -> Any:
    global _otel
    if _otel is None:
        try:
            from opentelemetry import context, trace
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )
        except ImportError:  # the extra is not installed
            _otel = False
        else:
            _otel = SimpleNamespace(
                context=context, trace=trace, propagator=TraceContextTextMapPropagator()
            )
    return _otel


def use(provider: Any) -> None:
    """Send tidings' spans to `provider` rather than the global one (None: the global)."""
    global _provider, _next_global_look
    _provider = provider
    _next_global_look = 0.0


def _tracer_provider() -> Any:
    return _provider if _provider is not None else _api().trace.get_tracer_provider()


def active() -> bool:
    """True when spans go somewhere: the extra is installed and a provider was set. A global
    provider set after tidings last looked counts within `GLOBAL_LOOK_S`."""
    global _global_seen, _next_global_look
    if _provider is None:
        if _global_seen:
            return True
        if time.monotonic() < _next_global_look:
            return False
    otel = _api()
    if not otel:
        return False
    if isinstance(_tracer_provider(), otel.trace.ProxyTracerProvider):
        _next_global_look = time.monotonic() + GLOBAL_LOOK_S
        return False
    _global_seen = _global_seen or _provider is None
    return True


def _context_of(traceparent: str | None) -> Any:
    if traceparent is None:
        return None
    return _api().propagator.extract({"traceparent": traceparent})


def _traceparent_of(span: Any) -> str | None:
    otel = _api()
    carrier: dict[str, str] = {}
    otel.propagator.inject(carrier, otel.trace.set_span_in_context(span))
    return carrier.get("traceparent")


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: str | None = None,
    links: Sequence[str | None] = (),
    attributes: dict[str, Any] | None = None,
    start_ns: int | None = None,
) -> Iterator[str | None]:
    """A span (a child of `parent`, or of the caller's current context); yields its own
    traceparent, to hand on (None when tracing is off)."""
    if not active():
        yield None
        return
    trace = _api().trace
    tracer = _tracer_provider().get_tracer(_TRACER)
    linked = [
        trace.Link(trace.get_current_span(_context_of(p)).get_span_context())
        for p in links[:MAX_LINKS]
        if p is not None
    ]
    context = _context_of(parent) if parent is not None else _api().context.get_current()
    with tracer.start_as_current_span(
        name, context=context, links=linked, attributes=attributes or {}, start_time=start_ns
    ) as current:
        yield _traceparent_of(current)


def now_ns() -> int:
    return time.time_ns()


def send_attributes(channel: Channel, delivery_id: int) -> dict[str, Any]:
    return {
        "tidings.channel": channel.name,
        "tidings.channel_kind": channel.kind,
        "tidings.delivery_id": delivery_id,
    }


def outcome(result: Outcome) -> None:
    """Name the send's outcome on the current span (an error status when not delivered)."""
    trace = _api().trace
    current = trace.get_current_span()
    status = attempt_status(result).value
    current.set_attribute("tidings.outcome", status)
    if status not in ("delivered", "partial"):
        error = getattr(result, "error", "")
        current.set_status(trace.Status(trace.StatusCode.ERROR, str(error)[:200]))


def claimed(claim: Claim, started_ns: int) -> None:
    """A finished claim as a span from `started_ns` to now, linked to its events' traces."""
    with span(
        "tidings.claim",
        links=[item.event.traceparent for item in claim.items],
        attributes={"tidings.channel": claim.channel.name, "tidings.rows": len(claim)},
        start_ns=started_ns,
    ):
        pass


def configure_from_environment() -> bool:
    """For `serve` and `worker`: export spans over OTLP when the standard `OTEL_*` variables
    ask for it (an endpoint set, the exporter not "none"). A library user sets up their own
    provider instead. True when configured."""
    if not _api() or active():
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp") == "none":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if not endpoint:
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return False
    name = os.environ.get("OTEL_SERVICE_NAME", "tidings")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    global _next_global_look
    _api().trace.set_tracer_provider(provider)
    _next_global_look = 0.0  # seen at the next look
    return True
