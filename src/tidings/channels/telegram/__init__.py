"""The `telegram` kind: Bot API `sendMessage` with `parse_mode=MarkdownV2` (channels.md §7).

Owns the kind's declaration and sending, including following a group's upgrade to a
supergroup; its answers are read in `answers`, its MarkdownV2 measured and cut in `markdown`.
Imports tidings.channels (base, chat, http), tidings.core and tidings.render.

The limit is "1-4096 characters after entities parsing": the declared unit is UTF-16 code units
of the text a reader sees — escapes and markup removed, link targets dropped (whether Telegram
counts UTF-16 units or code points is UNCONFIRMED; UTF-16 units are never fewer, so the count
is a safe upper bound).
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from typing import Any, ClassVar, Final

from tidings.channels.base import Message, SendContext
from tidings.channels.chat import ChatAdapter
from tidings.channels.telegram.answers import (
    DESCRIPTION_REASONS,
    ERROR_CODES,
    Migrated,
    classify_answer,
)
from tidings.channels.telegram.markdown import shorten_markdown_v2, tokenize, visible_units
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, Reason, Reject
from tidings.render import Flavour

API_BASE: Final = "https://api.telegram.org"
MAX_TEXT_UTF16: Final = 4096
#: Telegram allows 20 messages per minute in a group and 1 per second in a chat (Bot FAQ).
DEFAULT_RATE_PER_MIN: Final = 18.0

_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]+")
_CHAT = re.compile(r"-?\d+|@[A-Za-z][A-Za-z0-9_]{3,}")


class TelegramAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="telegram",
        description="A Telegram bot posting to a chat, group or channel (MarkdownV2).",
        fields=(
            ConfigField(
                "bot_token",
                FieldType.STRING,
                "The bot's token as @BotFather gave it (123456:ABC-…).",
                required=True,
                secret=True,
            ),
            ConfigField(
                "chat_id",
                FieldType.STRING_OR_INTEGER,
                "Where to post: a numeric chat id (groups start with -100) or @channelusername.",
                required=True,
                label="Chat id",
            ),
            ConfigField(
                "api_base",
                FieldType.URL,
                "The Bot API server, for a local one; Telegram's own when absent.",
                default=API_BASE,
                destination=True,
                label="API base URL",
            ),
        ),
        flavour=Flavour.TELEGRAM_MARKDOWN_V2.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_utf16_units=MAX_TEXT_UTF16,
        example={"bot_token": "123456789:AAYour-Bot-Token", "chat_id": -1001234567890},
    )
    # A migrated chat costs a config write and a second post: the dispatcher's guard stays.
    bounded_by_http_timeout: ClassVar[bool] = False

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        if not _TOKEN.fullmatch(config["bot_token"]):
            raise ValidationError(
                "config.bot_token", "must be the token @BotFather gave (digits:letters)"
            )
        if not _CHAT.fullmatch(str(config["chat_id"])):
            raise ValidationError(
                "config.chat_id", "must be a numeric chat id or a @channelusername"
            )
        base = config.get("api_base")
        if base is not None:
            if "?" in base or "#" in base:
                raise ValidationError("config.api_base", "must not have a query or fragment")
            config["api_base"] = base.rstrip("/")
        return config

    # -- rendering ------------------------------------------------------------------------

    def measure(self, text: str) -> int:
        return visible_units(text)

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
        return self.scrubbed(answer, channel)

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
            return self.failure(error, channel)
        return classify_answer(response, ctx.attempt_at)


__all__ = [
    "DESCRIPTION_REASONS",
    "ERROR_CODES",
    "TelegramAdapter",
    "classify_answer",
    "shorten_markdown_v2",
    "tokenize",
]
