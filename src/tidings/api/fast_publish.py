"""`POST /v1/events` on its busiest path — a live publish token, a well-formed event —
answered without FastAPI's routing and dependency solving: the route producers call once per
event, many at once, where those cost as much as storing the event.

Everything else goes on to the FastAPI route unchanged (the body handed on as it came): no
token or one that fails, a body that does not validate, another content type. So every
refusal is the route's own answer, and only the answers of a publish that was accepted are
made here, exactly as the route makes them (`tidings.api.events.publish_answer`).
"""

from __future__ import annotations

import logging

from pydantic import ValidationError as BodyInvalid
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.errors import error_response
from tidings.api.events import publish_answer
from tidings.api.schemas import EventIn
from tidings.auth import Scope as TokenScope
from tidings.auth import allows
from tidings.core.errors import TidingsError
from tidings.core.validate import valid_traceparent
from tidings.service import Service

log = logging.getLogger("tidings.api")

PATH = "/v1/events"


class FastPublish:
    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        token = _bearer(headers.get(b"authorization"))
        if token is None or headers.get(b"content-type") != b"application/json":
            await self.app(scope, receive, send)
            return
        body, last = await _body(receive)
        if last is not None:  # the client went away while sending
            await self.app(scope, _replay(body, receive, last), send)
            return
        try:
            event = EventIn.model_validate_json(body)
        except BodyInvalid:
            await self.app(scope, _replay(body, receive, None), send)
            return
        access = self.service.access
        traceparent = headers.get(b"traceparent")
        parent = valid_traceparent(traceparent.decode("latin-1") if traceparent else None)
        try:
            info = await access.authenticate(token)
        except TidingsError as error:  # the database is down: answered as the route would
            await _error(error)(scope, receive, send)
            return
        if info is None or not allows(info.scopes, TokenScope.PUBLISH):
            await self.app(scope, _replay(body, receive, None), send)
            return
        try:
            result = await self.service.publish(event.model_dump() | {"traceparent": parent})
            response = publish_answer(result)
        except Exception as error:
            response = _error(error)
        await response(scope, receive, send)
        if access.use_due(info):  # after the answer, as the route's background task
            await access.record_use(info.id)


def _error(error: Exception) -> Response:
    """As the API's one error handler (tidings.api.errors) answers the error."""
    if isinstance(error, TidingsError):
        return error_response(error.status, error.code, error.message)
    log.exception("unexpected error", exc_info=error)
    return error_response(500, "internal", "internal error; see the server log")


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """Header names lowered (as servers give them); a repeated header keeps its first value,
    as Starlette's `Headers.get` reads it."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        found.setdefault(name.lower(), value)
    return found


def _bearer(value: bytes | None) -> str | None:
    """The token of `Bearer <token>`, as FastAPI's HTTPBearer reads it; None otherwise."""
    if value is None:
        return None
    scheme, _, token = value.decode("latin-1").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


async def _body(receive: Receive) -> tuple[bytes, Message | None]:
    """The whole body (its size already held by BodyLimit outside), and the message that
    ended it early, if one did (a disconnect)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(body: bytes, receive: Receive, last: Message | None) -> Receive:
    """The body as one message, then `last` or what the server says next."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if last is not None:
        pending.append(last)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
