"""A WeCom group robot (`POST /cgi-bin/webhook/send?key=KEY`) answering as channels.md §1 says.

Business errors are HTTP 200 with a non-zero `errcode`: 93000 for an unknown key, 40058 for
bad JSON, a wrong method or content over its byte limit, 40008 for an unknown msgtype, 44004
for empty content, 93017 for an empty body, 45009 past 20 messages in a sliding 60 s window
per key. Tests may script the next answers (`fail_next`, `hang_next`, `answer_next`).

UNCONFIRMED vendor facts stay switchable: `text_limit_bytes` (documented 2048, one report
shows 5120), `count_rejected` (whether refused requests spend the 20/min budget).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script, SlidingWindow

PATH = "/cgi-bin/webhook/send"
DEFAULT_KEY = "robot-key-0001"
ERRMSG = {
    0: "ok",
    -1: "system busy",
    40008: "invalid message type",
    40058: "invalid Request Parameter",
    44004: "empty text content",
    45002: "content size out of limit",
    45009: "api freq out of limit",
    45033: "api concurrent out of limit",
    93000: "invalid webhook url",
    93004: "webhook disabled",
    93008: "not in the group",
    93017: "request content empty",
}
CONTENT_TYPES = {"text": "text", "markdown": "markdown", "markdown_v2": "markdown_v2"}


@dataclass(frozen=True)
class Scripted:
    """One scripted answer: hang first (seconds), then a raw answer or a business code."""

    code: int | None = None
    errmsg: str | None = None
    status: int = 200
    raw: str | None = None
    hang_s: float = 0.0


class WecomEmulator(Emulator):
    def __init__(
        self,
        keys: Iterable[str] = (DEFAULT_KEY,),
        *,
        limit: int = 20,
        window_s: float = 60.0,
        markdown_limit_bytes: int = 4096,
        text_limit_bytes: int = 2048,
        count_rejected: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.keys = set(keys)
        self.limit = limit
        self.window_s = window_s
        self.limits_bytes = {
            "markdown": markdown_limit_bytes,
            "markdown_v2": markdown_limit_bytes,
            "text": text_limit_bytes,
        }
        self.count_rejected = count_rejected
        self.clock = clock
        self.answers: list[int] = []  # the errcode of every answer, in order
        self.accepted: list[dict[str, Any]] = []  # every message the robot posted
        self._script: Script[Scripted] = Script()
        self._windows: dict[str, SlidingWindow] = {}
        self._state = threading.Lock()

    # -- what tests use ------------------------------------------------------------------

    def webhook_url(self, key: str = DEFAULT_KEY) -> str:
        return self.url(f"{PATH}?key={key}")

    def fail_next(self, code: int, errmsg: str | None = None, *, times: int = 1) -> None:
        with self._state:
            self._script.push(*[Scripted(code=code, errmsg=errmsg)] * times)

    def answer_next(self, status: int, raw: str) -> None:
        with self._state:
            self._script.push(Scripted(status=status, raw=raw))

    def hang_next(self, seconds: float) -> None:
        with self._state:
            self._script.push(Scripted(hang_s=seconds))

    def codes(self) -> list[int]:
        with self._state:
            return list(self.answers)

    def contents(self) -> list[str]:
        """The content of every accepted message, in order."""
        with self._state:
            return [m[m["msgtype"]]["content"] for m in self.accepted]

    # -- the robot -----------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", PATH, self._send)]

    async def _send(self, request: web.Request) -> web.Response:
        body = await self.record(request)
        with self._state:
            scripted = self._script.pop()
        if scripted is not None:
            await asyncio.sleep(scripted.hang_s)
            if scripted.raw is not None:
                return web.Response(status=scripted.status, text=scripted.raw)
            if scripted.code is not None:
                return self._answer(scripted.code, scripted.errmsg, scripted.status)
        with self._state:
            code, detail = self._handle(request.method, request.query.get("key", ""), body)
        return self._answer(code, detail)

    def _handle(self, method: str, key: str, body: bytes) -> tuple[int, str | None]:
        if key not in self.keys:
            return 93000, None
        if method != "POST":
            return 40058, "wrong HTTP method"
        window = self._windows.setdefault(key, SlidingWindow(self.limit, self.window_s))
        now = self.clock()
        if window.full(now):
            return 45009, None
        code, detail, message = self._validate(body)
        if code == 0 or self.count_rejected:
            window.add(now)
        if code == 0:
            assert message is not None
            self.accepted.append(message)
        return code, detail

    def _validate(self, body: bytes) -> tuple[int, str | None, dict[str, Any] | None]:
        if not body.strip():
            return 93017, None, None
        try:
            message = json.loads(body)
        except ValueError:
            return 40058, "Warning: wrong json format.", None
        if not isinstance(message, dict):
            return 40058, "Warning: wrong json format.", None
        msgtype = message.get("msgtype")
        if msgtype not in CONTENT_TYPES:
            return 40008, None, None
        inner = message.get(msgtype)
        content = inner.get("content") if isinstance(inner, dict) else None
        if not isinstance(content, str) or not content:
            return 44004, None, None
        limit = self.limits_bytes[msgtype]
        if len(content.encode()) > limit:
            return 40058, f"{msgtype}.content exceed max length {limit}.", None
        return 0, None, message

    def _answer(self, code: int, detail: str | None = None, status: int = 200) -> web.Response:
        with self._state:
            self.answers.append(code)
        text = detail or ERRMSG.get(code, "unknown error")
        if code == 40058 and detail:
            text = f"{detail} invalid Request Parameter"
        if code != 0:
            text += (
                ", hint: [1700000000_1_emulator], from ip: 127.0.0.1, more info at "
                f"https://open.work.weixin.qq.com/devtool/query?e={code}"
            )
        answer = {"errcode": code, "errmsg": text}
        return web.json_response(answer, status=status, dumps=_dumps)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
