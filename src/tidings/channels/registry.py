"""The registry of channel kinds: a literal table of built-ins plus an entry-point group.

Third-party kinds register under the `tidings.channels` entry-point group; a kind registered
twice fails at start rather than silently replacing another.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import entry_points

from tidings.channels.apprise import AppriseAdapter
from tidings.channels.base import Adapter
from tidings.channels.dingtalk import DingtalkAdapter
from tidings.channels.discord import DiscordAdapter
from tidings.channels.email import EmailAdapter
from tidings.channels.feishu import FeishuAdapter
from tidings.channels.inbox import InboxAdapter
from tidings.channels.slack import SlackAdapter
from tidings.channels.teams import TeamsAdapter
from tidings.channels.telegram import TelegramAdapter
from tidings.channels.webhook import WebhookAdapter
from tidings.channels.wecom import WecomAdapter
from tidings.core.errors import ConfigError, ValidationError

ENTRY_POINT_GROUP = "tidings.channels"


def builtin_adapters() -> list[Adapter]:
    return [
        WebhookAdapter(),
        InboxAdapter(),
        SlackAdapter(),
        TeamsAdapter(),
        DiscordAdapter(),
        WecomAdapter(),
        DingtalkAdapter(),
        FeishuAdapter(),
        TelegramAdapter(),
        EmailAdapter(),
        AppriseAdapter(),
    ]


class Registry:
    def __init__(self, adapters: Iterable[Adapter]) -> None:
        self._by_kind: dict[str, Adapter] = {}
        for adapter in adapters:
            if adapter.kind in self._by_kind:
                raise ConfigError(f"channel kind {adapter.kind!r} is registered twice")
            self._by_kind[adapter.kind] = adapter

    @classmethod
    def default(cls) -> Registry:
        plugins = [ep.load()() for ep in entry_points(group=ENTRY_POINT_GROUP)]
        return cls([*builtin_adapters(), *plugins])

    def get(self, kind: str) -> Adapter:
        try:
            return self._by_kind[kind]
        except KeyError:
            known = ", ".join(sorted(self._by_kind))
            raise ValidationError(
                "kind", f"unknown channel kind {kind!r} (known: {known})"
            ) from None

    def kinds(self) -> list[str]:
        return sorted(self._by_kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._by_kind
