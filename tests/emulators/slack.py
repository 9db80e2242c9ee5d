"""A Slack incoming webhook (`POST /services/T…/B…/TOKEN`) answering as channels.md §4 says.

Success is HTTP 200 with the plain body `ok`; errors are plain-text codes with a status:
400 `invalid_payload` (not JSON), 400 `missing_text_or_fallback_or_attachments`, 400
`invalid_blocks` (over 50 blocks, a section text over 3000 characters, more than 10 fields
or a field over 2000, an unknown block type), 404 `no_service` for a removed webhook, 410
`channel_is_archived`, 404 `channel_not_found`, 403 `action_prohibited`; past about one
message a second (token bucket, small burst) 429 with an integer `Retry-After` and a JSON
body. Tests script the next answers (`fail_next`, `answer_next`, `hang_next`, `echo_next`)
or switch a hook's state (`set_state`, `revoke`).

UNCONFIRMED vendor facts stay switchable: `statuses` (the HTTP status of `no_service` and of
codes whose status is unknown), `long_text` (whether `text` over 40,000 characters is
truncated or refused).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script, TokenBucket

PATH = "/services/{team}/{bot}/{token}"
DEFAULT_TOKEN = "hooktoken0000000000000001"
ACTIVE = "active"
MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_FIELDS = 10
MAX_FIELD_CHARS = 2000
MAX_HEADER_CHARS = 150
MAX_TEXT_CHARS = 40_000

#: The HTTP status each error code comes with. `no_service`'s is UNCONFIRMED (commonly 404),
#: and so are those of the codes below the line.
STATUSES: Mapping[str, int] = {
    "invalid_payload": 400,
    "user_not_found": 400,
    "invalid_blocks": 400,
    "missing_text_or_fallback_or_attachments": 400,
    "action_prohibited": 403,
    "channel_not_found": 404,
    "no_service": 404,
    "channel_is_archived": 410,
    "rollup_error": 500,
    # UNCONFIRMED statuses:
    "invalid_token": 403,
    "no_team": 404,
    "team_disabled": 403,
    "posting_to_general_channel_denied": 403,
    "too_many_attachments": 400,
    "msg_too_long": 400,
}


@dataclass(frozen=True)
class Scripted:
    """One scripted answer: hang first (seconds), then a code, a raw answer or an echo."""

    code: str | None = None
    status: int | None = None
    raw: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    hang_s: float = 0.0
    echo: bool = False


class SlackEmulator(Emulator):
    def __init__(
        self,
        *,
        rate_per_s: float | None = 1.0,
        burst: int = 3,
        long_text: str = "truncate",
        statuses: Mapping[str, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if long_text not in ("truncate", "reject"):
            raise ValueError("long_text is 'truncate' or 'reject'")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.long_text = long_text
        self.statuses = dict(STATUSES) | dict(statuses or {})
        self.clock = clock
        self.hooks: dict[str, str] = {}  # path → ACTIVE or the error code it answers
        self.posted: list[dict[str, Any]] = []  # every message the webhook accepted
        self.answers: list[tuple[int, str]] = []  # (status, body) of every answer
        self._script: Script[Scripted] = Script()
        self._buckets: dict[str, TokenBucket] = {}
        self._state = threading.RLock()

    # -- what tests use ------------------------------------------------------------------

    def webhook_url(
        self, token: str = DEFAULT_TOKEN, team: str = "T0000001", bot: str = "B0000001"
    ) -> str:
        """A new active webhook; its URL."""
        path = PATH.format(team=team, bot=bot, token=token)
        with self._state:
            self.hooks[path] = ACTIVE
        return self.url(path)

    def set_state(self, url: str, code: str) -> None:
        """Make a hook answer `code` from now on (e.g. `channel_is_archived`), or ACTIVE."""
        with self._state:
            self.hooks[_path(url)] = code

    def revoke(self, url: str) -> None:
        """Remove the webhook: it answers `no_service`."""
        with self._state:
            self.hooks.pop(_path(url), None)

    def fail_next(self, code: str, *, status: int | None = None, times: int = 1) -> None:
        with self._state:
            self._script.push(*[Scripted(code=code, status=status)] * times)

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

    def texts(self) -> list[str]:
        """The section text of every accepted message, in order."""
        with self._state:
            return [m["blocks"][0]["text"]["text"] for m in self.posted if m.get("blocks")]

    # -- the webhook ---------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self._post)]

    async def _post(self, request: web.Request) -> web.Response:
        body = await self.record(request)
        with self._state:
            scripted = self._script.pop()
        if scripted is not None:
            await asyncio.sleep(scripted.hang_s)
            if scripted.echo:
                return self._answer(scripted.status or 500, f"cannot post to {request.url}")
            if scripted.raw is not None:
                return self._answer(scripted.status or 200, scripted.raw, scripted.headers)
            if scripted.code is not None:
                return self._error(scripted.code, scripted.status)
        with self._state:
            return self._handle(request.path, body)

    def _handle(self, path: str, body: bytes) -> web.Response:
        state = self.hooks.get(path)
        if state is None:
            return self._error("no_service")
        if state != ACTIVE:
            return self._error(state)
        wait = self._take(path)
        if wait > 0:
            retry_after = str(max(1, math.ceil(wait)))
            document = json.dumps({"ok": False, "error": "rate_limited"})
            return self._answer(429, document, {"Retry-After": retry_after}, "application/json")
        code, message = validate(body, self.long_text)
        if code is not None:
            return self._error(code)
        assert message is not None
        self.posted.append(message)
        return self._answer(200, "ok")

    def _take(self, path: str) -> float:
        if self.rate_per_s is None:
            return 0.0
        now = self.clock()
        bucket = self._buckets.setdefault(path, TokenBucket(self.rate_per_s, self.burst, now))
        return bucket.take(now)

    def _error(self, code: str, status: int | None = None) -> web.Response:
        return self._answer(status or self.statuses.get(code, 400), code)

    def _answer(
        self,
        status: int,
        text: str,
        headers: Mapping[str, str] | None = None,
        content_type: str = "text/plain",
    ) -> web.Response:
        with self._state:
            self.answers.append((status, text))
        return web.Response(
            status=status, text=text, headers=dict(headers or {}), content_type=content_type
        )


def _path(url: str) -> str:
    return "/" + url.split("://", 1)[-1].split("/", 1)[1]


def validate(body: bytes, long_text: str = "truncate") -> tuple[str | None, dict[str, Any] | None]:
    """(error code, None) or (None, the message as posted)."""
    try:
        message = json.loads(body)
    except ValueError:
        return "invalid_payload", None
    if not isinstance(message, dict):
        return "invalid_payload", None
    text, blocks = message.get("text"), message.get("blocks")
    if not text and not blocks and not message.get("attachments"):
        return "missing_text_or_fallback_or_attachments", None
    if text is not None and not isinstance(text, str):
        return "invalid_payload", None
    if blocks is not None and not _blocks_ok(blocks):
        return "invalid_blocks", None
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        if long_text == "reject":
            return "msg_too_long", None
        message["text"] = text[:MAX_TEXT_CHARS]
    return None, message


def _text_ok(value: object, limit: int, types: tuple[str, ...] = ("mrkdwn", "plain_text")) -> bool:
    if not isinstance(value, dict) or value.get("type") not in types:
        return False
    text = value.get("text")
    return isinstance(text, str) and 1 <= len(text) <= limit


def _blocks_ok(blocks: object) -> bool:
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        return False
    return all(isinstance(b, dict) and _block_ok(b) for b in blocks)


def _block_ok(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "divider":
        return True
    if kind == "header":
        return _text_ok(block.get("text"), MAX_HEADER_CHARS, ("plain_text",))
    if kind == "context":
        elements = block.get("elements")
        return isinstance(elements, list) and 1 <= len(elements) <= 10
    if kind != "section":
        return False
    text, fields = block.get("text"), block.get("fields")
    if text is None and fields is None:
        return False
    if text is not None and not _text_ok(text, MAX_SECTION_CHARS):
        return False
    if fields is None:
        return True
    return (
        isinstance(fields, list)
        and len(fields) <= MAX_FIELDS
        and all(_text_ok(f, MAX_FIELD_CHARS) for f in fields)
    )
