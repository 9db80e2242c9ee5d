"""The `telegram` kind: Bot API `sendMessage` with `parse_mode=MarkdownV2` (channels.md §7).

Owns Telegram's answer table, following a group's upgrade to a supergroup, and the MarkdownV2
measure and entity-safe shortening the 4096 limit needs. Imports tidings.channels (chat, http),
tidings.core and tidings.render.

The limit is "1-4096 characters after entities parsing": `measure` counts the text a reader
sees — escapes and markup removed, link targets dropped — in UTF-16 code units (whether
Telegram counts UTF-16 units or code points is UNCONFIRMED; UTF-16 units are never fewer, so
the count is a safe upper bound). Text it cannot tokenize is counted whole, also an upper bound.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Final

from tidings.channels.base import Limits, Message, SendContext
from tidings.channels.chat import ChatAdapter, scrub_secrets
from tidings.channels.http import (
    MAX_ERROR_CHARS,
    HttpResponse,
    classify,
    header,
    outcome_for_exception,
)
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.core.retry import parse_retry_after
from tidings.core.states import AttemptStatus
from tidings.core.text import MARKER, truncate_chars
from tidings.render import Flavour
from tidings.render.flavours import escape_telegram

API_BASE: Final = "https://api.telegram.org"
MAX_TEXT_UTF16: Final = 4096
#: Telegram allows 20 messages per minute in a group and 1 per second in a chat (Bot FAQ).
DEFAULT_RATE_PER_MIN: Final = 18.0

#: HTTP status (equal to `error_code` in observed answers) → what it means for the message.
ERROR_CODES: Final[Mapping[int, tuple[AttemptStatus, Reason]]] = {
    400: (AttemptStatus.PERMANENT, Reason.CLIENT_ERROR),
    401: (AttemptStatus.PERMANENT, Reason.AUTH),
    403: (AttemptStatus.PERMANENT, Reason.AUTH),
    404: (AttemptStatus.PERMANENT, Reason.INVALID_TARGET),
    429: (AttemptStatus.RATE_LIMITED, Reason.RATE_LIMITED),
}
#: Telegram warns that `error_code` may change; the description refines the reason.
DESCRIPTION_REASONS: Final[tuple[tuple[str, Reason], ...]] = (
    ("chat not found", Reason.INVALID_TARGET),
    ("bot was blocked by the user", Reason.INVALID_TARGET),
    ("bot was kicked", Reason.INVALID_TARGET),
    ("bot can't initiate conversation", Reason.INVALID_TARGET),
    ("user is deactivated", Reason.INVALID_TARGET),
    ("message is too long", Reason.TOO_LARGE),
    ("text is too long", Reason.TOO_LARGE),
    ("can't parse entities", Reason.CLIENT_ERROR),
)

_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]+")
_CHAT = re.compile(r"-?\d+|@[A-Za-z][A-Za-z0-9_]{3,}")


class TelegramAdapter(ChatAdapter):
    kind: ClassVar[str] = "telegram"
    flavour: ClassVar[Flavour] = Flavour.TELEGRAM_MARKDOWN_V2
    limits: ClassVar[Limits] = Limits(
        max_message_size=MAX_TEXT_UTF16,
        size_unit="chars",
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        flavour=Flavour.TELEGRAM_MARKDOWN_V2.value,
    )
    spec: ClassVar[KindSpec] = KindSpec(
        kind="telegram",
        description="A Telegram bot posting to a chat, group or channel",
        fields=(
            ConfigField(
                "bot_token",
                FieldType.STRING,
                "The token @BotFather gave (digits:letters)",
                required=True,
                secret=True,
            ),
            ConfigField(
                "chat_id",
                FieldType.STRING,
                "A numeric chat id or a @channelusername",
                required=True,
                label="Chat id",
            ),
            ConfigField(
                "api_base",
                FieldType.URL,
                "The Bot API server; the public one when absent",
                label="API base URL",
            ),
        ),
        flavour=Flavour.TELEGRAM_MARKDOWN_V2.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_utf16_units=MAX_TEXT_UTF16,
    )
    secret_fields: ClassVar[tuple[str, ...]] = ("bot_token",)
    # A migrated chat costs a config write and a second post: the dispatcher's guard stays.
    bounded_by_http_timeout: ClassVar[bool] = False

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        token = config.get("bot_token")
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            raise ValidationError(
                "config.bot_token", "must be the token @BotFather gave (digits:letters)"
            )
        chat = config.get("chat_id")
        if isinstance(chat, bool) or not _CHAT.fullmatch(str(chat)):
            raise ValidationError(
                "config.chat_id", "must be a numeric chat id or a @channelusername"
            )
        checked = dict(config)
        base = config.get("api_base")
        if base is not None:
            if not isinstance(base, str) or not base.startswith(("http://", "https://")):
                raise ValidationError("config.api_base", "an http:// or https:// URL is required")
            if "?" in base or "#" in base:
                raise ValidationError("config.api_base", "must not have a query or fragment")
            checked["api_base"] = base.rstrip("/")
        return checked

    # -- rendering ------------------------------------------------------------------------

    def measure(self, text: str) -> int:
        try:
            return sum(_utf16(token.visible) for token in tokenize(text))
        except MalformedMarkdown:
            return _utf16(text)

    def shorten(self, text: str, limit: int) -> str:
        return shorten_markdown_v2(text, limit)

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        return {
            "chat_id": channel.config["chat_id"],
            "text": text,
            "parse_mode": "MarkdownV2",
            "link_preview_options": {"is_disabled": True},
        }

    # -- sending --------------------------------------------------------------------------

    def url(self, channel: Channel, now: datetime | None = None) -> str:
        base = str(channel.config.get("api_base") or API_BASE).rstrip("/")
        return f"{base}/bot{channel.config['bot_token']}/sendMessage"

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        started = asyncio.get_running_loop().time()
        answer = await self._post(ctx, channel, message.payload, channel.timeout_s)
        if isinstance(answer, Migrated):
            left = channel.timeout_s - (asyncio.get_running_loop().time() - started)
            answer = await self._follow(ctx, channel, message, answer.chat_id, max(left, 1.0))
        return scrub_secrets(answer, self.secrets_of(channel))

    async def _follow(
        self,
        ctx: SendContext,
        channel: Channel,
        message: Message,
        new_chat: int | str,
        timeout_s: float,
    ) -> Outcome:
        """The group became a supergroup: remember its new id and resend once, to it."""
        note = f"chat {channel.config.get('chat_id')} migrated to {new_chat}"
        try:
            await ctx.store.update_channel_config(channel.id, {"chat_id": new_chat})
        except Exception as error:  # the resend still reaches the right chat
            note += f" (saving the new chat id failed: {type(error).__name__}: {error})"
        document = json.loads(message.payload)
        document["chat_id"] = new_chat
        body = json.dumps(document, ensure_ascii=False).encode()
        again = await self._post(ctx, channel, body, timeout_s)  # within the same attempt
        if isinstance(again, Migrated):
            return Reject(Reason.INVALID_TARGET, f"{note}, which migrated again to {again.chat_id}")
        if isinstance(again, Delivered):
            return Delivered(provider_response=f"{note}; {again.provider_response or ''}")
        return again

    async def _post(
        self, ctx: SendContext, channel: Channel, body: bytes, timeout_s: float
    ) -> Outcome | Migrated:
        try:
            response = await ctx.http.post(
                self.url(channel),
                body=body,
                headers={"content-type": "application/json; charset=utf-8"},
                timeout_s=timeout_s,
            )
        except Exception as error:  # translated at the boundary into an outcome
            return outcome_for_exception(error)
        return classify_answer(response, ctx.attempt_at)


# --- classification -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migrated:
    """400 with `parameters.migrate_to_chat_id`: not a failure, a new address."""

    chat_id: int | str


@dataclass(frozen=True, slots=True)
class Answer:
    """The parts of a Bot API answer that classification reads."""

    ok: bool | None
    code: int | None
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)


def read_answer(text: str) -> Answer:
    try:
        document = json.loads(text)
    except ValueError:
        return Answer(None, None, " ".join(text.split()))
    if not isinstance(document, dict):
        return Answer(None, None, " ".join(text.split()))
    code = document.get("error_code")
    parameters = document.get("parameters")
    return Answer(
        ok=document.get("ok") if isinstance(document.get("ok"), bool) else None,
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        description=str(document.get("description") or ""),
        parameters=parameters if isinstance(parameters, dict) else {},
    )


def classify_answer(response: HttpResponse, now: datetime) -> Outcome | Migrated:
    """HTTP status first, then the body: a 200 is delivered only when it says `ok: true`."""
    answer = read_answer(response.text)
    body = response.text or None
    ok_status = 200 <= response.status <= 299
    if ok_status and answer.ok is True:
        return Delivered(provider_response=body)
    code = response.status if not ok_status else answer.code
    error = _error(code if code is not None else response.status, answer)
    new_chat = answer.parameters.get("migrate_to_chat_id")
    if isinstance(new_chat, int | str) and not isinstance(new_chat, bool) and str(new_chat):
        return Migrated(new_chat)
    hint = _retry_after(answer, response, now)
    rule = ERROR_CODES.get(code) if code is not None else None
    if rule is not None:
        kind, reason = rule
        if kind is AttemptStatus.RATE_LIMITED:
            return RateLimited(error, retry_after_s=hint, provider_response=body)
        return Reject(_refine(reason, answer.description), error, provider_response=body)
    if ok_status:
        # A 200 that does not say ok: never recorded as delivered.
        reason = Reason.VENDOR_ERROR if answer.ok is False else Reason.UNEXPECTED
        what = "ok: false" if answer.ok is False else "no ok: true"
        return Retry(reason, f"HTTP {response.status} with {what}: {error}", hint, body)
    outcome = classify(response, now)
    if isinstance(outcome, Retry):
        return Retry(outcome.reason, error, hint, body)
    return outcome


def _refine(reason: Reason, description: str) -> Reason:
    lowered = description.lower()
    return next((r for text, r in DESCRIPTION_REASONS if text in lowered), reason)


def _retry_after(answer: Answer, response: HttpResponse, now: datetime) -> float | None:
    value = answer.parameters.get("retry_after")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return parse_retry_after(str(int(value)), now)
    return parse_retry_after(header(response.headers, "Retry-After"), now)


def _error(code: int, answer: Answer) -> str:
    text = f"Telegram {code}: {answer.description}" if answer.description else f"HTTP {code}"
    return truncate_chars(text, MAX_ERROR_CHARS)


# --- MarkdownV2: what a reader sees, and cutting without breaking entities -----------------


class MalformedMarkdown(ValueError):
    """Text whose MarkdownV2 structure cannot be followed (an unterminated code or link)."""


@dataclass(frozen=True, slots=True)
class Token:
    source: str  # as written
    visible: str  # what the reader sees of it
    kind: str  # "text", "toggle", "open" (a link), "close" (`](url)`), "atom" (code)
    closer: str = ""  # for "toggle" and "open": what ends the entity


_PLAIN_RUN = re.compile(r"[^\\`*_~|\[\]!>\n]+")
_TOGGLES = ("||", "__", "*", "_", "~")


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def tokenize(text: str) -> list[Token]:
    """Split MarkdownV2 into tokens; a link's opening token carries its `](url)` closer."""
    tokens: list[Token] = []
    links: list[int] = []
    i, line_start = 0, True
    while i < len(text):
        token = _next_token(text, i, line_start)
        if token.kind == "open":
            links.append(len(tokens))
        elif token.kind == "close":
            if not links:
                raise MalformedMarkdown(f"a link closes at {i} but none is open")
            opened = links.pop()
            tokens[opened] = Token(tokens[opened].source, "", "open", token.source)
        tokens.append(token)
        i += len(token.source)
        line_start = token.source.endswith("\n")
    if links:
        raise MalformedMarkdown("a link is never closed")
    return tokens


def _next_token(text: str, i: int, line_start: bool) -> Token:
    char = text[i]
    if char == "\\":
        if i + 1 >= len(text):
            raise MalformedMarkdown("a lone backslash ends the text")
        return Token(text[i : i + 2], text[i + 1], "text")
    if char == "`":
        return _code(text, i)
    if char == "]":
        return _link_close(text, i)
    if char == "[" or text.startswith("![", i):
        return Token("[" if char == "[" else "![", "", "open")
    if char == ">" and line_start:
        return Token(char, "", "text")  # a block quote marker
    toggle = next((t for t in _TOGGLES if text.startswith(t, i)), None)
    if toggle is not None:
        return Token(toggle, "", "toggle", toggle)
    run = _PLAIN_RUN.match(text, i)
    source = run.group() if run else char
    return Token(source, source, "text")


def _code(text: str, i: int) -> Token:
    fence = "```" if text.startswith("```", i) else "`"
    j = i + len(fence)
    while j < len(text) and not text.startswith(fence, j):
        j += 2 if text[j] == "\\" else 1
    if j >= len(text):
        raise MalformedMarkdown(f"code opened at {i} is never closed")
    inner = text[i + len(fence) : j]
    if fence == "```" and "\n" in inner:
        first, rest = inner.split("\n", 1)
        inner = rest if first and " " not in first else inner  # a language name is not shown
    visible = re.sub(r"\\(.)", r"\1", inner, flags=re.DOTALL)
    return Token(text[i : j + len(fence)], visible, "atom")


def _link_close(text: str, i: int) -> Token:
    if not text.startswith("](", i):
        raise MalformedMarkdown(f"']' at {i} is not followed by '('")
    j = i + 2
    while j < len(text) and text[j] != ")":
        j += 2 if text[j] == "\\" else 1
    if j >= len(text):
        raise MalformedMarkdown(f"the link target at {i} is never closed")
    return Token(text[i : j + 1], "", "close")


def shorten_markdown_v2(text: str, limit: int) -> str:
    """At most `limit` visible UTF-16 units: the start kept, `…` marking the cut, and every
    entity open at the cut closed again, so Telegram can still parse it."""
    try:
        tokens = tokenize(text)
    except MalformedMarkdown:
        return _shorten_plain(text, limit)
    budget = limit - _utf16(MARKER)
    if budget < 0:
        return ""
    kept: list[str] = []
    open_entities: list[str] = []  # closers, innermost last
    used = 0
    for token in tokens:
        cost = _utf16(token.visible)
        if used + cost > budget:
            if token.kind == "text" and token.source == token.visible:
                kept.append(_utf16_prefix(token.source, budget - used))
            break
        used += cost
        kept.append(token.source)
        if token.kind == "toggle" and token.closer in open_entities:
            open_entities.remove(token.closer)
        elif token.kind in ("toggle", "open"):
            open_entities.append(token.closer)
        elif token.kind == "close" and token.source in open_entities:
            open_entities.remove(token.source)
    return "".join(kept) + MARKER + _closing(open_entities)


def _closing(open_entities: list[str]) -> str:
    """Closers innermost first, with an empty bold entity between `_` and `__`, which Telegram
    would otherwise read greedily as one underline marker (its documented separator)."""
    out = ""
    for closer in reversed(open_entities):
        if out.endswith("_") and closer.startswith("_"):
            out += "**"
        out += closer
    return out


def _utf16_prefix(text: str, units: int) -> str:
    taken, used = [], 0
    for char in text:
        used += _utf16(char)
        if used > units:
            break
        taken.append(char)
    return "".join(taken)


def _shorten_plain(text: str, limit: int) -> str:
    """Structure unknown: drop the markup, cut the text, escape it all (valid, if plain)."""
    plain = re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)
    budget = max(limit - _utf16(MARKER), 0)
    if _utf16(plain) <= limit:
        return escape_telegram(plain)
    return escape_telegram(_utf16_prefix(plain, budget)) + MARKER


__all__ = [
    "DESCRIPTION_REASONS",
    "ERROR_CODES",
    "TelegramAdapter",
    "classify_answer",
    "shorten_markdown_v2",
    "tokenize",
]
