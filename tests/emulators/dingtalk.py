"""A DingTalk custom robot (`POST /robot/send?access_token=T[&timestamp=ms&sign=…]`) answering
as channels.md §2 says: HTTP 200 for every business error.

Checks, in order: the token (300001), a 10-minute block after a rate overflow (130101), the
robot's security settings — signature (310000 `sign not match` / `invalid timestamp` beyond
±1 h), IP whitelist, keywords (310000 `keywords not in content`) — the body size (460101 past
20,000 bytes), the message shape (400402 for a missing markdown title or text), then the rate:
20 accepted messages per sliding 60 s per token; the 21st gets 130101 and blocks the robot.

UNCONFIRMED vendor facts stay switchable: the IP-whitelist wording, `wait_fields` (the
`status/wait/punish` fields one capture carried with 130101), `too_long_code` (460101, or the
older 101002), and which fields the keyword check scans (text.content, markdown.title/text).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script, SlidingWindow

PATH = "/robot/send"
DEFAULT_TOKEN = "robot-token-0001"
ERRMSG = {
    0: "ok",
    -1: "系统繁忙",
    130101: "send too fast, exceed 20 times per minute",
    300001: "token is not exist",
    300005: "token is not exist",
    310000: "keywords not in content",
    400402: "参数 markdown --》 title 缺失",
    460101: "message too long, exceed 20000 bytes",
    101002: "message is too long",
}


@dataclass(frozen=True)
class Robot:
    """One robot's security settings (each real robot has at least one; none here is allowed
    so that plain tests stay short)."""

    secret: str | None = None
    keywords: tuple[str, ...] = ()
    ip_allowed: bool = True


@dataclass(frozen=True)
class Scripted:
    code: int | None = None
    errmsg: str | None = None
    status: int = 200
    raw: str | None = None
    hang_s: float = 0.0


def expected_sign(secret: str, timestamp_ms: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode()


class DingtalkEmulator(Emulator):
    def __init__(
        self,
        robots: Mapping[str, Robot] | None = None,
        *,
        limit: int = 20,
        window_s: float = 60.0,
        block_s: float = 600.0,
        max_body_bytes: int = 20_000,
        too_long_code: int = 460101,
        skew_s: float = 3600.0,
        wait_fields: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.robots = dict(robots) if robots is not None else {DEFAULT_TOKEN: Robot()}
        self.limit = limit
        self.window_s = window_s
        self.block_s = block_s
        self.max_body_bytes = max_body_bytes
        self.too_long_code = too_long_code
        self.skew_s = skew_s
        self.wait_fields = wait_fields
        self.clock = clock
        self.answers: list[int] = []
        self.accepted: list[dict[str, Any]] = []
        self._script: Script[Scripted] = Script()
        self._windows: dict[str, SlidingWindow] = {}
        self._blocked_until: dict[str, float] = {}
        self._state = threading.Lock()

    # -- what tests use ------------------------------------------------------------------

    def webhook_url(self, token: str = DEFAULT_TOKEN) -> str:
        return self.url(f"{PATH}?access_token={token}")

    def fail_next(self, code: int, errmsg: str | None = None, *, status: int = 200) -> None:
        with self._state:
            self._script.push(Scripted(code=code, errmsg=errmsg, status=status))

    def answer_next(self, status: int, raw: str) -> None:
        with self._state:
            self._script.push(Scripted(status=status, raw=raw))

    def hang_next(self, seconds: float) -> None:
        with self._state:
            self._script.push(Scripted(hang_s=seconds))

    def codes(self) -> list[int]:
        with self._state:
            return list(self.answers)

    # -- the robot -----------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self._send)]

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
            code, detail = self._handle(dict(request.query), body)
        return self._answer(code, detail)

    def _handle(self, query: dict[str, str], body: bytes) -> tuple[int, str | None]:
        token = query.get("access_token", "")
        robot = self.robots.get(token)
        if robot is None:
            return 300001, None
        now = self.clock()
        if now < self._blocked_until.get(token, float("-inf")):
            return 130101, None
        refused = self._security(robot, query, body, now)
        if refused is not None:
            return 310000, refused
        if len(body) > self.max_body_bytes:
            return self.too_long_code, None
        code, detail, message = _validate(body)
        if code != 0:
            return code, detail
        window = self._windows.setdefault(token, SlidingWindow(self.limit, self.window_s))
        if not window.admit(now):
            self._blocked_until[token] = now + self.block_s
            return 130101, None
        assert message is not None
        self.accepted.append(message)
        return 0, None

    def _security(self, robot: Robot, query: dict[str, str], body: bytes, now: float) -> str | None:
        """The errmsg of a failed security check, or None."""
        if robot.secret is not None:
            stamp, signature = query.get("timestamp", ""), query.get("sign", "")
            if not stamp.isdigit() or abs(now * 1000 - int(stamp)) > self.skew_s * 1000:
                return "invalid timestamp"
            if not hmac.compare_digest(signature, expected_sign(robot.secret, stamp)):
                return "sign not match"
        if not robot.ip_allowed:
            return "ip 127.0.0.1 not in whitelist"
        if robot.keywords:
            scanned = _scanned_text(body)
            if not any(word in scanned for word in robot.keywords):
                return "keywords not in content"
        return None

    def _answer(self, code: int, detail: str | None = None, status: int = 200) -> web.Response:
        with self._state:
            self.answers.append(code)
        answer: dict[str, Any] = {
            "errcode": code,
            "errmsg": detail or ERRMSG.get(code, "unknown error"),
        }
        if code == 130101 and self.wait_fields:
            answer |= {"status": 1111, "wait": 5, "punish": "deny"}
        return web.json_response(answer, status=status, dumps=_dumps)


def _validate(body: bytes) -> tuple[int, str | None, dict[str, Any] | None]:
    try:
        message = json.loads(body)
    except ValueError:
        return 400402, "参数 msgtype 缺失", None
    if not isinstance(message, dict) or message.get("msgtype") not in ("text", "markdown"):
        return 400402, "参数 msgtype 缺失", None
    msgtype = message["msgtype"]
    inner = message.get(msgtype)
    fields = ("content",) if msgtype == "text" else ("title", "text")
    for name in fields:
        value = inner.get(name) if isinstance(inner, dict) else None
        if not isinstance(value, str) or not value:
            return 400402, f"参数 {msgtype} --》 {name} 缺失", None
    return 0, None, message


def _scanned_text(body: bytes) -> str:
    try:
        message = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(message, dict):
        return ""
    text = message.get("text") if isinstance(message.get("text"), dict) else {}
    markdown = message.get("markdown") if isinstance(message.get("markdown"), dict) else {}
    parts = [text.get("content"), markdown.get("title"), markdown.get("text")]
    return "\n".join(p for p in parts if isinstance(p, str))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
