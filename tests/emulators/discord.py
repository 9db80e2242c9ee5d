"""A Discord webhook (`POST /api/webhooks/{id}/{token}`) answering as channels.md §6 says.

With `?wait=true` success is 200 and the created message; without it, 204. Errors are JSON
`{"code", "message"}`: 404 10015 for an unknown (deleted) webhook, 50027 for a wrong token,
400 50006 for an empty message, 400 50035 (with `errors`) for content over 2000 characters
or more than 10 embeds, 413 40005 for a body over `max_body_bytes`. Every answer carries the
`X-RateLimit-*` headers of the webhook's bucket; past it, 429 with `retry_after` (float
seconds), `global` and a `Retry-After` header. Accepted messages record whether they would
have pinged @everyone/@here (`mention_everyone`), honouring `allowed_mentions`.

UNCONFIRMED vendor facts stay switchable: the bucket (`bucket_limit` per `bucket_window_s`,
5 per 2 s observed in 2017), `count_utf16` (whether content is counted in UTF-16 code
units), `bad_token_status` (the HTTP status of 50027).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script

PATH = "/api/webhooks/{webhook_id}/{token}"
DEFAULT_ID = "1100000000000000001"
DEFAULT_TOKEN = "webhooktoken00000000000000000001"
MAX_CONTENT = 2000
MAX_EMBEDS = 10
MESSAGES = {
    10015: "Unknown Webhook",
    50027: "Invalid Webhook Token",
    50001: "Missing Access",
    50006: "Cannot send an empty message",
    50035: "Invalid Form Body",
    40005: "Request entity too large",
    50109: "The request body contains invalid JSON.",
    0: "502: Bad Gateway",
}
#: The HTTP status each code comes with (50027's is UNCONFIRMED: see `bad_token_status`).
STATUSES = {10015: 404, 50027: 401, 50001: 403, 50006: 400, 50035: 400, 40005: 413, 50109: 400}
PARSEABLE = ("everyone", "users", "roles")


@dataclass(frozen=True)
class Scripted:
    """One scripted answer: hang first (seconds), then an error, a 429 or a raw answer."""

    status: int | None = None
    code: int | None = None
    raw: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    hang_s: float = 0.0
    retry_after: float | None = None
    global_: bool = False
    errors: Mapping[str, Any] | None = None
    echo: bool = False


class Bucket:
    """Discord's fixed-window bucket: `limit` requests per window from the first one."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self.used = 0
        self.reset_at = 0.0

    def take(self, now: float) -> bool:
        if now >= self.reset_at:
            self.used, self.reset_at = 0, now + self.window_s
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def headers(self, now: float, wall: float, name: str) -> dict[str, str]:
        after = max(self.reset_at - now, 0.0)
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(self.limit - self.used, 0)),
            "X-RateLimit-Reset": f"{wall + after:.3f}",
            "X-RateLimit-Reset-After": f"{after:.3f}",
            "X-RateLimit-Bucket": name,
        }


class DiscordEmulator(Emulator):
    def __init__(
        self,
        *,
        bucket_limit: int | None = 5,
        bucket_window_s: float = 2.0,
        count_utf16: bool = False,
        bad_token_status: int = STATUSES[50027],
        max_body_bytes: int = 8 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.bucket_limit = bucket_limit
        self.bucket_window_s = bucket_window_s
        self.count_utf16 = count_utf16
        self.bad_token_status = bad_token_status
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self.webhooks: dict[str, str] = {}  # id → token
        self.messages: list[dict[str, Any]] = []  # every message the webhook created
        self.answers: list[tuple[int, int | None]] = []  # (status, JSON code) per answer
        self._script: Script[Scripted] = Script()
        self._buckets: dict[str, Bucket] = {}
        self._ids = itertools.count(1200000000000000001)
        self._state = threading.RLock()

    # -- what tests use ------------------------------------------------------------------

    def webhook_url(self, token: str = DEFAULT_TOKEN, webhook_id: str = DEFAULT_ID) -> str:
        """A new webhook; its URL (without `wait`, as Discord shows it)."""
        with self._state:
            self.webhooks[webhook_id] = token
        return self.url(PATH.format(webhook_id=webhook_id, token=token))

    def delete(self, webhook_id: str = DEFAULT_ID) -> None:
        with self._state:
            self.webhooks.pop(webhook_id, None)

    def fail_next(
        self, code: int, *, status: int | None = None, errors: Mapping[str, Any] | None = None
    ) -> None:
        with self._state:
            self._script.push(Scripted(status=status, code=code, errors=errors))

    def rate_limit_next(
        self, retry_after: float, *, global_: bool = False, header: bool = True, body: bool = True
    ) -> None:
        """A 429 with `retry_after` in the body and/or the `Retry-After` header."""
        headers = {"X-RateLimit-Scope": "user"}
        if header:
            headers["Retry-After"] = str(math.ceil(retry_after))
        if global_:
            headers |= {"X-RateLimit-Global": "true", "X-RateLimit-Scope": "global"}
        scripted = Scripted(
            status=429,
            headers=headers,
            retry_after=retry_after if body else None,
            global_=global_,
            raw=None if body else "",
        )
        with self._state:
            self._script.push(scripted)

    def answer_next(self, status: int, raw: str, headers: Mapping[str, str] | None = None) -> None:
        with self._state:
            self._script.push(Scripted(status=status, raw=raw, headers=dict(headers or {})))

    def hang_next(self, seconds: float) -> None:
        with self._state:
            self._script.push(Scripted(hang_s=seconds))

    def echo_next(self, status: int = 500) -> None:
        """An answer quoting the request's URL (a misbehaving proxy): tests secret scrubbing."""
        with self._state:
            self._script.push(Scripted(status=status, echo=True))

    def contents(self) -> list[str]:
        with self._state:
            return [str(m["content"]) for m in self.messages]

    # -- the webhook ---------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self._execute)]

    async def _execute(self, request: web.Request) -> web.Response:
        body = await self.record(request)
        with self._state:
            scripted = self._script.pop()
        if scripted is not None:
            await asyncio.sleep(scripted.hang_s)
            answer = self._scripted(scripted, request)
            if answer is not None:
                return answer
        webhook_id, token = request.match_info["webhook_id"], request.match_info["token"]
        with self._state:
            if webhook_id not in self.webhooks:
                return self._error(10015)
            if token != self.webhooks[webhook_id]:
                return self._error(50027, status=self.bad_token_status)
            bucket = self._bucket(webhook_id)
            now = self.clock()
            limits = bucket.headers(now, time.time(), webhook_id)
            if not bucket.take(now):
                return self._limited(float(limits["X-RateLimit-Reset-After"]), False, limits)
            limits = bucket.headers(now, time.time(), webhook_id)
            return self._create(webhook_id, request.query.get("wait") == "true", body, limits)

    def _scripted(self, scripted: Scripted, request: web.Request) -> web.Response | None:
        if scripted.echo:
            return self._raw(scripted.status or 500, f"cannot execute {request.url}")
        if scripted.status == 429 and scripted.raw is None:
            return self._limited(scripted.retry_after or 0.0, scripted.global_, scripted.headers)
        if scripted.raw is not None:
            return self._raw(scripted.status or 200, scripted.raw, scripted.headers)
        if scripted.code is not None:
            return self._error(scripted.code, status=scripted.status, errors=scripted.errors)
        return None

    def _bucket(self, webhook_id: str) -> Bucket:
        limit = self.bucket_limit if self.bucket_limit is not None else 1 << 30
        return self._buckets.setdefault(webhook_id, Bucket(limit, self.bucket_window_s))

    def _create(
        self, webhook_id: str, wait: bool, body: bytes, limits: Mapping[str, str]
    ) -> web.Response:
        if len(body) > self.max_body_bytes:
            return self._error(40005, headers=limits)
        try:
            document = json.loads(body)
        except ValueError:
            return self._error(50109, headers=limits)
        if not isinstance(document, dict):
            return self._error(50109, headers=limits)
        code, errors = self._validate(document)
        if code is not None:
            return self._error(code, errors=errors, headers=limits)
        message = self._message(webhook_id, document)
        self.messages.append(message)
        if not wait:
            return self._raw(204, "", limits)
        self.answers.append((200, None))
        return web.json_response(message, headers=dict(limits))

    def _validate(self, document: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
        content = document.get("content")
        embeds = document.get("embeds") or []
        if content is not None and not isinstance(content, str):
            return 50035, _field_error("content", "BASE_TYPE_STRING", "Must be a string.")
        if not isinstance(embeds, list) or len(embeds) > MAX_EMBEDS:
            return 50035, _field_error("embeds", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer.")
        others = any(document.get(k) for k in ("components", "file", "poll"))
        if not (content or "").strip() and not embeds and not others:
            return 50006, None
        if content is not None and self._length(content) > MAX_CONTENT:
            message = f"Must be {MAX_CONTENT} or fewer in length."
            return 50035, _field_error("content", "BASE_TYPE_MAX_LENGTH", message)
        return None, None

    def _length(self, text: str) -> int:
        return len(text.encode("utf-16-le")) // 2 if self.count_utf16 else len(text)

    def _message(self, webhook_id: str, document: dict[str, Any]) -> dict[str, Any]:
        content = str(document.get("content") or "")
        allowed = document.get("allowed_mentions")
        parse = allowed.get("parse", []) if isinstance(allowed, dict) else list(PARSEABLE)
        mass = "@everyone" in content or "@here" in content
        return {
            "id": str(next(self._ids)),
            "type": 0,
            "channel_id": "1300000000000000001",
            "webhook_id": webhook_id,
            "content": content,
            "embeds": document.get("embeds") or [],
            "mention_everyone": mass and "everyone" in parse,
            "timestamp": "2025-01-01T00:00:00.000000+00:00",
        }

    def _limited(
        self, retry_after: float, global_: bool, headers: Mapping[str, str]
    ) -> web.Response:
        document = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": global_,
        }
        extra = {"X-RateLimit-Scope": "user"} | dict(headers)
        extra.setdefault("Retry-After", str(math.ceil(retry_after)))
        with self._state:
            self.answers.append((429, None))
        return web.json_response(document, status=429, headers=extra)

    def _error(
        self,
        code: int,
        *,
        status: int | None = None,
        errors: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> web.Response:
        document: dict[str, Any] = {"message": MESSAGES.get(code, "Error"), "code": code}
        if errors:
            document["errors"] = dict(errors)
        status = status or STATUSES.get(code, 400)
        with self._state:
            self.answers.append((status, code))
        return web.json_response(document, status=status, headers=dict(headers or {}))

    def _raw(
        self, status: int, text: str, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        with self._state:
            self.answers.append((status, None))
        if status == 204:
            return web.Response(status=204, headers=dict(headers or {}))
        return web.Response(status=status, text=text, headers=dict(headers or {}))


def _field_error(name: str, code: str, message: str) -> dict[str, Any]:
    return {name: {"_errors": [{"code": code, "message": message}]}}
