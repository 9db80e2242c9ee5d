"""Telegram Bot API emulator: `sendMessage` answering as channels.md §7 says.

Routes `/bot<token>/<method>` (methods case-insensitive); unknown token → 401; unknown chat →
400 chat not found; blocked → 403; a migrated group → 400 with `parameters.migrate_to_chat_id`;
MarkdownV2 parsed on its own terms (reserved characters, unclosed entities → 400 can't parse
entities); visible text over 4096 → 400 message is too long; 1 message/s per chat and 20/min
per group → 429 with `parameters.retry_after`. Tests script answers with `fail_next`.

UNCONFIRMED, so configurable: the burst a chat tolerates before 429 (`chat_burst`), and whether
the 4096 limit counts UTF-16 code units or code points (`count_unit`).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script

RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MARKERS = {"||": "Spoiler", "__": "Underline", "*": "Bold", "_": "Italic", "~": "Strikethrough"}


class ParseError(ValueError):
    """What Telegram says after "can't parse entities: "."""


def parse_markdown_v2(text: str) -> str:
    """The plain text a reader sees, or ParseError the way Telegram words it."""
    parser = _Parser(text)
    return parser.run()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.plain: list[str] = []
        self.stack: list[tuple[str, int]] = []  # (marker, byte offset)

    def offset(self, i: int) -> int:
        return len(self.text[:i].encode())

    def run(self) -> str:
        text, i, line_start = self.text, 0, True
        while i < len(text):
            char = text[i]
            if char == "\\":
                if i + 1 >= len(text):
                    raise ParseError("Character '\\' is reserved and must be escaped")
                self.plain.append(text[i + 1])
                i += 2
            elif char == "`":
                i = self.code(i)
            elif char == "[" or text.startswith("![", i):
                self.stack.append(("[", self.offset(i)))
                i += 1 if char == "[" else 2
            elif char == "]":
                i = self.link_end(i)
            elif char == "\r" or (char == ">" and line_start):
                i += 1
            else:
                i = self.marker_or_char(i)
            line_start = char == "\n"
        if self.stack:
            marker, at = self.stack[-1]
            name = "TextUrl" if marker == "[" else _MARKERS[marker]
            raise ParseError(f"Can't find end of {name} entity at byte offset {at}")
        return "".join(self.plain)

    def code(self, i: int) -> int:
        fence = "```" if self.text.startswith("```", i) else "`"
        j, inner = i + len(fence), []
        while j < len(self.text) and not self.text.startswith(fence, j):
            if self.text[j] == "\\" and j + 1 < len(self.text):
                inner.append(self.text[j + 1])
                j += 2
            else:
                inner.append(self.text[j])
                j += 1
        if j >= len(self.text):
            name = "Pre" if fence == "```" else "Code"
            raise ParseError(f"Can't find end of {name} entity at byte offset {self.offset(i)}")
        content = "".join(inner)
        if fence == "```" and "\n" in content:
            first, rest = content.split("\n", 1)
            content = rest if first and " " not in first else content
        self.plain.append(content)
        return j + len(fence)

    def link_end(self, i: int) -> int:
        if not self.stack or self.stack[-1][0] != "[":
            raise ParseError(
                "Character ']' is reserved and must be escaped with the preceding '\\'"
            )
        if not self.text.startswith("](", i):
            raise ParseError(f"Can't find end of a URL at byte offset {self.offset(i)}")
        j = i + 2
        while j < len(self.text) and self.text[j] != ")":
            j += 2 if self.text[j] == "\\" else 1
        if j >= len(self.text) or j == i + 2:
            raise ParseError(f"Can't find end of a URL at byte offset {self.offset(i)}")
        self.stack.pop()
        return j + 1

    def marker_or_char(self, i: int) -> int:
        marker = next((m for m in _MARKERS if self.text.startswith(m, i)), None)
        if marker is None:
            char = self.text[i]
            if char in RESERVED:
                raise ParseError(
                    f"Character '{char}' is reserved and must be escaped with the preceding '\\'"
                )
            self.plain.append(char)
            return i + 1
        if self.stack and self.stack[-1][0] == marker:
            self.stack.pop()
        elif any(m == marker for m, _ in self.stack):
            raise ParseError(
                f"Can't find end of {_MARKERS[marker]} entity at byte offset {self.offset(i)}"
            )
        else:
            self.stack.append((marker, self.offset(i)))
        return i + len(marker)


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Scripted:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0


@dataclass
class Sent:
    chat_id: str
    text: str
    plain: str
    parse_mode: str | None


class TelegramEmulator(Emulator):
    def __init__(
        self,
        token: str,
        *,
        per_chat_per_s: float | None = 1.0,
        chat_burst: int = 3,
        group_per_min: int | None = 20,
        max_text: int = 4096,
        count_unit: str = "utf16",
    ) -> None:
        super().__init__()
        self.tokens = {token}
        self.chats: dict[str, str] = {}  # chat id → "private" | "group" | "supergroup"
        self.blocked: dict[str, str] = {}  # chat id → the 403 description
        self.migrations: dict[str, int] = {}
        self.sent: list[Sent] = []
        self.per_chat_per_s = per_chat_per_s
        self.chat_burst = chat_burst
        self.group_per_min = group_per_min
        self.max_text = max_text
        self.count_unit = count_unit
        self._script: Script[Scripted] = Script()
        self._buckets: dict[str, tuple[float, float]] = {}
        self._group_sends: dict[str, deque[float]] = {}
        self._state = threading.Lock()
        self._next_id = 1

    # -- arranging ------------------------------------------------------------------------

    def add_chat(self, chat_id: int | str, kind: str = "private") -> None:
        with self._state:
            self.chats[str(chat_id)] = kind

    def block(self, chat_id: int | str, description: str = "bot was blocked by the user") -> None:
        with self._state:
            self.blocked[str(chat_id)] = f"Forbidden: {description}"

    def migrate(self, old: int | str, new: int) -> None:
        """The group `old` was upgraded to the supergroup `new`."""
        with self._state:
            self.chats.pop(str(old), None)
            self.migrations[str(old)] = new
            self.chats[str(new)] = "supergroup"

    def fail_next(
        self,
        status: int,
        description: str = "",
        *,
        parameters: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        ok: bool = False,
    ) -> None:
        """Answer the next request with this (a JSON error by default, or `body` as given)."""
        if body is None:
            body = {"ok": ok, "error_code": status, "description": description}
            if parameters:
                body["parameters"] = parameters
        with self._state:
            self._script.push(Scripted(status, body, dict(headers or {})))

    def hang_next(self, seconds: float) -> None:
        with self._state:
            self._script.push(Scripted(200, {"ok": True, "result": {}}, hang_s=seconds))

    def messages(self) -> list[Sent]:
        with self._state:
            return list(self.sent)

    # -- serving --------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/bot{token}/{method}", self.handle),
            web.get("/bot{token}/{method}", self.handle),
        ]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await self.record(request)
        with self._state:
            scripted = self._script.pop()
        if scripted is not None:
            await asyncio.sleep(scripted.hang_s)
            if isinstance(scripted.body, str):
                return web.Response(
                    status=scripted.status, text=scripted.body, headers=scripted.headers
                )
            return web.json_response(
                scripted.body, status=scripted.status, headers=scripted.headers
            )
        if request.match_info["token"] not in self.tokens:
            return _error(401, "Unauthorized")
        if request.match_info["method"].lower() != "sendmessage":
            return _error(404, "Not Found")
        params = _params(request, body)
        with self._state:
            return self.send_message(params)

    def send_message(self, params: dict[str, Any]) -> web.Response:
        chat = str(params.get("chat_id", ""))
        text = params.get("text")
        if not chat:
            return _error(400, "Bad Request: chat_id is empty")
        if chat in self.migrations:
            return _error(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                {"migrate_to_chat_id": self.migrations[chat]},
            )
        if chat not in self.chats:
            return _error(400, "Bad Request: chat not found")
        if chat in self.blocked:
            return _error(403, self.blocked[chat])
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        mode = params.get("parse_mode")
        if mode == "MarkdownV2":
            try:
                plain = parse_markdown_v2(text)
            except ParseError as error:
                return _error(400, f"Bad Request: can't parse entities: {error}")
        elif mode in (None, ""):
            plain = text
        else:
            return _error(400, f"Bad Request: unsupported parse_mode {mode}")
        if not plain.strip():
            return _error(400, "Bad Request: message text is empty")
        size = utf16_units(plain) if self.count_unit == "utf16" else len(plain)
        if size > self.max_text:
            return _error(400, "Bad Request: message is too long")
        wait = self._throttle(chat)
        if wait is not None:
            return _error(429, f"Too Many Requests: retry after {wait}", {"retry_after": wait})
        self.sent.append(Sent(chat, text, plain, mode))
        self._next_id += 1
        result = {
            "message_id": self._next_id,
            "date": int(time.time()),
            "chat": {"id": _chat_value(chat), "type": self.chats[chat]},
            "text": plain,
        }
        return web.json_response({"ok": True, "result": result})

    def _throttle(self, chat: str) -> int | None:
        """Seconds to wait, or None after spending this message's budget."""
        now = time.monotonic()
        tokens = float(self.chat_burst)
        if self.per_chat_per_s:
            tokens, last = self._buckets.get(chat, (float(self.chat_burst), now))
            tokens = min(float(self.chat_burst), tokens + (now - last) * self.per_chat_per_s)
            if tokens < 1:
                return max(1, math.ceil((1 - tokens) / self.per_chat_per_s))
        window = self._group_sends.setdefault(chat, deque())
        if self.group_per_min and self.chats[chat] in ("group", "supergroup"):
            while window and now - window[0] >= 60:
                window.popleft()
            if len(window) >= self.group_per_min:
                return max(1, math.ceil(60 - (now - window[0])))
        if self.per_chat_per_s:
            self._buckets[chat] = (tokens - 1, now)
        window.append(now)
        return None


def _params(request: web.Request, body: bytes) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        document = json.loads(body or b"{}")
        if isinstance(document, dict):
            params.update(document)
    elif body:
        from urllib.parse import parse_qsl

        params.update(parse_qsl(body.decode()))
    return params


def _chat_value(chat: str) -> int | str:
    return int(chat) if chat.lstrip("-").isdigit() else chat


def _error(code: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=code)
