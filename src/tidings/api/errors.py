"""One place that turns errors into JSON `{"error": {"code", "message"}}` with a fitting status.

Domain errors carry their own code and status; request validation becomes 422 naming the
field; anything unexpected is logged and answered 500 without internals.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tidings.core.errors import TidingsError

log = logging.getLogger("tidings.api")


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def install(app: FastAPI) -> None:
    @app.exception_handler(TidingsError)
    async def domain(_request: Request, error: TidingsError) -> JSONResponse:
        return error_response(error.status, error.code, error.message)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path"))
        message = f"{where or 'request'}: {first.get('msg', 'invalid input')}"
        return error_response(422, "invalid", message)

    @app.exception_handler(HTTPException)
    async def http(_request: Request, error: HTTPException) -> JSONResponse:
        codes = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}
        response = error_response(
            error.status_code, codes.get(error.status_code, "http_error"), str(error.detail)
        )
        if error.headers:
            response.headers.update(error.headers)
        return response

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=error)
        return error_response(500, "internal", "internal error; see the server log")
