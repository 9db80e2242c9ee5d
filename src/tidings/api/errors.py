"""One place that turns errors into JSON `{"error": {"code", "message"}}` with a fitting status.

Domain errors carry their own code and status; request validation becomes 422 naming the
field, or the body when it is not a JSON object (said only to a caller with a valid token:
FastAPI decodes a body before the route checks the token); a 405 names every method the
path serves; anything unexpected is logged and answered 500 without internals.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Scope

from tidings.api import security
from tidings.core.errors import TidingsError

log = logging.getLogger("tidings.api")
#: FastAPI's detail for a body that failed before JSON decoding proper (not UTF-8).
UNREADABLE_BODY = "There was an error parsing the body"
NOT_JSON = "not valid JSON (send a UTF-8 encoded JSON object)"
#: Pydantic's error types for a body that is JSON, but not an object.
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "dict_type", "model_type"})


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def install(app: FastAPI) -> None:
    @app.exception_handler(TidingsError)
    async def domain(_request: Request, error: TidingsError) -> JSONResponse:
        return error_response(error.status, error.code, error.message)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        if first.get("type") == "json_invalid":
            refused = await _unauthenticated(app, request)
            if refused is not None:
                return refused
        return error_response(422, "invalid", _invalid_message(first))

    @app.exception_handler(HTTPException)
    async def http(request: Request, error: HTTPException) -> JSONResponse:
        if error.status_code == 400 and error.detail == UNREADABLE_BODY:
            # FastAPI's answer to a body its JSON decoder could not even read (not UTF-8):
            # the same refusal as any other body that is not JSON.
            refused = await _unauthenticated(app, request)
            return refused or error_response(422, "invalid", f"body: {NOT_JSON}")
        return _http_error(app, request, error)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=error)
        return error_response(500, "internal", "internal error; see the server log")


def _invalid_message(first: Any) -> str:
    """`where: what`, naming the field; a body that is not a JSON object is named as such
    (the decoder's position is not a field)."""
    loc = tuple(first.get("loc", ()))
    kind = first.get("type")
    if loc[:1] == ("body",) and kind == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "")
        at = f" at character {loc[1]}" if len(loc) > 1 else ""
        return f"body: not valid JSON ({detail}{at})" if detail else f"body: {NOT_JSON}"
    if loc == ("body",) and kind in _NOT_AN_OBJECT:
        return "body: must be a JSON object"
    if loc == ("body",) and kind == "missing":
        return "body: is required (a JSON object)"
    where = ".".join(str(p) for p in loc if p not in ("body", "query", "path"))
    return f"{where or 'request'}: {first.get('msg', 'invalid input')}"


#: The methods a 405's Allow may name.
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """The methods this request's path is served by: each method asked of the router, as it
    would route it (routes may be nested in included routers)."""
    return [
        method
        for method in METHODS
        if any(
            route.matches({**scope, "method": method})[0] is Match.FULL
            for route in app.router.routes
        )
    ]


def _http_error(app: FastAPI, request: Request, error: HTTPException) -> JSONResponse:
    codes = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}
    response = error_response(
        error.status_code, codes.get(error.status_code, "http_error"), str(error.detail)
    )
    if error.headers:
        response.headers.update(error.headers)
    if error.status_code == 405:
        # Starlette names only the methods of the first route on the path; a path is
        # served by one route per method here.
        response.headers["Allow"] = ", ".join(allowed_methods(app, request.scope))
    return response


async def _unauthenticated(app: FastAPI, request: Request) -> JSONResponse | None:
    """The 401 for a body refused before the route checked the request's token (FastAPI
    decodes a JSON body first): what is wrong with a body is told to callers only."""
    try:
        await security.authenticate(request)
    except HTTPException as refusal:
        return _http_error(app, request, refusal)
    return None
