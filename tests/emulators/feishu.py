"""A Feishu / Lark custom bot (`POST /open-apis/bot/v2/hook/<TOKEN>`) answering as
channels.md §3 says: HTTP 200 with a non-zero `code` for business errors.

Checks, in order: the token, the body size (9499 past 20,000 bytes), JSON (9499), the
signature (19021: `timestamp` and `sign` in the body, ±1 h), the IP whitelist (19022), the
message type (19002), its shape (9499: a card must be schema 2.0 with a plain_text header
title and markdown elements; post needs a language block; text needs content.text), the
keywords (19024, scanned in text-like values only), then the rate: 5 a second and 100 a
minute per bot (11232).

UNCONFIRMED vendor facts stay switchable: `unknown_token_code` (third-party code reads 19001),
`status_9499` (Apprise says 9499 comes with a non-200 status; 200 by default), the exact
11232 text, and whether 20 KB means 20,000 bytes (`max_body_bytes`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script, SlidingWindow

PREFIX = "/open-apis/bot/v2/hook/"
DEFAULT_TOKEN = "bot-token-0001"
MSG = {
    0: "success",
    9499: "Bad Request",
    11232: "frequency limited psm[lark.oapi.app_platform_runtime]appID[1]",
    19001: "param invalid: incoming webhook access token invalid",
    19002: "params error, msg_type need",
    19021: "sign match fail or timestamp is not within one hour from current time",
    19022: "Ip Not Allowed",
    19024: "Key Words Not Found",
}
_TEXT_KEYS = frozenset({"text", "title", "content"})


@dataclass(frozen=True)
class Bot:
    secret: str | None = None
    keywords: tuple[str, ...] = ()
    ip_allowed: bool = True


@dataclass(frozen=True)
class Scripted:
    code: int | None = None
    msg: str | None = None
    status: int = 200
    raw: str | None = None
    hang_s: float = 0.0


def expected_sign(secret: str, timestamp_s: str) -> str:
    key = f"{timestamp_s}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


class FeishuEmulator(Emulator):
    def __init__(
        self,
        bots: Mapping[str, Bot] | None = None,
        *,
        per_second: int = 5,
        per_minute: int = 100,
        max_body_bytes: int = 20_000,
        status_9499: int = 200,
        unknown_token_code: int = 19001,
        skew_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.bots = dict(bots) if bots is not None else {DEFAULT_TOKEN: Bot()}
        self.windows = ((per_second, 1.0), (per_minute, 60.0))
        self.max_body_bytes = max_body_bytes
        self.status_9499 = status_9499
        self.unknown_token_code = unknown_token_code
        self.skew_s = skew_s
        self.clock = clock
        self.answers: list[int] = []
        self.accepted: list[dict[str, Any]] = []
        self._script: Script[Scripted] = Script()
        self._windows: dict[str, tuple[SlidingWindow, ...]] = {}
        self._state = threading.Lock()

    # -- what tests use ------------------------------------------------------------------

    def webhook_url(self, token: str = DEFAULT_TOKEN) -> str:
        return self.url(PREFIX + token)

    def fail_next(self, code: int, msg: str | None = None, *, status: int = 200) -> None:
        with self._state:
            self._script.push(Scripted(code=code, msg=msg, status=status))

    def answer_next(self, status: int, raw: str) -> None:
        with self._state:
            self._script.push(Scripted(status=status, raw=raw))

    def hang_next(self, seconds: float) -> None:
        with self._state:
            self._script.push(Scripted(hang_s=seconds))

    def codes(self) -> list[int]:
        with self._state:
            return list(self.answers)

    # -- the bot -------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PREFIX + "{token}", self._send)]

    async def _send(self, request: web.Request) -> web.Response:
        body = await self.record(request)
        with self._state:
            scripted = self._script.pop()
        if scripted is not None:
            await asyncio.sleep(scripted.hang_s)
            if scripted.raw is not None:
                return web.Response(status=scripted.status, text=scripted.raw)
            if scripted.code is not None:
                return self._answer(scripted.code, scripted.msg, scripted.status)
        with self._state:
            code, detail = self._handle(request.match_info["token"], body)
        status = self.status_9499 if code == 9499 else 200
        return self._answer(code, detail, status)

    def _handle(self, token: str, body: bytes) -> tuple[int, str | None]:
        bot = self.bots.get(token)
        if bot is None:
            return self.unknown_token_code, None
        if len(body) > self.max_body_bytes:
            return 9499, None
        try:
            message = json.loads(body)
        except ValueError:
            return 9499, None
        if not isinstance(message, dict):
            return 9499, None
        now = self.clock()
        if bot.secret is not None and not self._signed(bot.secret, message, now):
            return 19021, None
        if not bot.ip_allowed:
            return 19022, None
        code = _validate(message)
        if code != 0:
            return code, None
        if bot.keywords:
            scanned = "\n".join(_text_values(message))
            if not any(word in scanned for word in bot.keywords):
                return 19024, None
        windows = self._windows.setdefault(
            token, tuple(SlidingWindow(limit, window_s) for limit, window_s in self.windows)
        )
        if any(window.full(now) for window in windows):
            return 11232, None
        for window in windows:
            window.add(now)
        self.accepted.append(message)
        return 0, None

    def _signed(self, secret: str, message: dict[str, Any], now: float) -> bool:
        stamp, signature = message.get("timestamp"), message.get("sign")
        if not isinstance(stamp, str) or not stamp.isdigit() or not isinstance(signature, str):
            return False
        if abs(now - int(stamp)) > self.skew_s:
            return False
        return hmac.compare_digest(signature, expected_sign(secret, stamp))

    def _answer(self, code: int, detail: str | None = None, status: int = 200) -> web.Response:
        with self._state:
            self.answers.append(code)
        msg = detail or MSG.get(code, "unknown error")
        answer: dict[str, Any] = {"code": code, "data": {}, "msg": msg}
        if code == 0:
            answer = {"StatusCode": 0, "StatusMessage": "success"} | answer
        return web.json_response(answer, status=status, dumps=_dumps)


def _validate(message: dict[str, Any]) -> int:
    """0, 19002 (no or unknown msg_type) or 9499 (a body of the wrong shape)."""
    kind = message.get("msg_type")
    if kind == "text":
        content = message.get("content")
        ok = isinstance(content, dict) and isinstance(content.get("text"), str)
        return 0 if ok else 9499
    if kind == "post":
        post = _get(message, "content", "post")
        ok = isinstance(post, dict) and any(lang in post for lang in ("zh_cn", "en_us"))
        return 0 if ok else 9499
    if kind == "interactive":
        return 0 if _card_ok(message.get("card")) else 9499
    return 19002


def _card_ok(card: object) -> bool:
    if not isinstance(card, dict) or card.get("schema") != "2.0":
        return False
    if _get(card, "header", "title", "tag") != "plain_text":
        return False
    if not isinstance(_get(card, "header", "title", "content"), str):
        return False
    elements = _get(card, "body", "elements")
    if not isinstance(elements, list) or not elements:
        return False
    return all(
        isinstance(e, dict)
        and e.get("tag") == "markdown"
        and isinstance(e.get("content"), str)
        and bool(e["content"])
        for e in elements
    )


def _get(value: object, *keys: str) -> object:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _text_values(value: object, key: str = "") -> Iterator[str]:
    """Text-like values (`text`, `title`, `content` strings): never URLs or other fields."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _text_values(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from _text_values(item, key)
    elif isinstance(value, str) and key in _TEXT_KEYS:
        yield value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
