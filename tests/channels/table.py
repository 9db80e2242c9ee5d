"""One row per channel kind for the conformance suite: how to start the kind's emulator, a
valid config aimed at it, how to make it hang, echo a secret or give each kind of answer,
and how the vendor measures what it accepted. `test_conformance.py` runs every check over
these rows; a new kind adds a row here and passes them all.
"""

from __future__ import annotations

import base64
import contextlib
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.channels.harness import CANARY
from tests.emulators.dingtalk import DingtalkEmulator, Robot
from tests.emulators.discord import DiscordEmulator
from tests.emulators.feishu import Bot, FeishuEmulator
from tests.emulators.slack import SlackEmulator
from tests.emulators.smtp import SmtpEmulator
from tests.emulators.teams import TeamsEmulator
from tests.emulators.telegram import TelegramEmulator, utf16_units
from tests.emulators.wecom import WecomEmulator
from tests.sink import Answer, Sink
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry

Emulator = Any
Arrange = Callable[[Emulator], None]

WHSEC = "whsec_" + base64.b64encode(f"{CANARY}-signing-key".encode()).decode()
KEY = f"{CANARY}-robot-key"
SIGNING = f"SEC{CANARY}-signing"
BOT_TOKEN = f"123456:{CANARY}-AAHdqTcvCH1vGWJxfSeofSAs0K5"
CHAT = -1001234567890
SMTP_USER = "alerts@example.com"
SMTP_PASSWORD = f"pw-{CANARY}"


@dataclass(frozen=True)
class Row:
    kind: str
    #: Starts the kind's emulator on 127.0.0.1; yields it.
    start: Callable[[], contextlib.AbstractContextManager[Emulator]]
    #: A valid config aimed at the emulator, holding the kind's secrets.
    config: Callable[[Emulator], dict[str, Any]]
    #: A valid config aimed at a closed port on 127.0.0.1.
    unreachable: Callable[[int], dict[str, Any]]
    #: A valid config for validation tests (no emulator needed).
    example: dict[str, Any]
    #: Make the emulator's next answer take this many seconds.
    hang: Callable[[Emulator, float], None]
    #: Make the emulator's next answer quote the channel's secrets.
    echo: Arrange
    #: The kind's answers: name → (arrange the next one, the outcome type it must give).
    answers: Mapping[str, tuple[Arrange, type[Outcome]]]
    #: The vendor's own measure of every message it accepted, in the declared unit.
    sent_sizes: Callable[[Emulator], list[int]]
    #: The text of every message it accepted (the event title must be in it).
    texts: Callable[[Emulator], list[str]]
    timeout_reason: Reason | None = Reason.TIMEOUT
    refused_reason: Reason | None = Reason.CONNECTION
    #: Extra fields for the channel (a faster emulator needs no policy change).
    fields: Mapping[str, Any] = field(default_factory=dict)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- one emulator per kind ----------------------------------------------------------------


@contextlib.contextmanager
def _sink() -> Iterator[Sink]:
    with Sink() as sink:
        yield sink


@contextlib.contextmanager
def _wecom() -> Iterator[WecomEmulator]:
    with WecomEmulator(keys=[KEY]) as emu:
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _dingtalk() -> Iterator[DingtalkEmulator]:
    with DingtalkEmulator({KEY: Robot(secret=SIGNING)}) as emu:
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _feishu() -> Iterator[FeishuEmulator]:
    with FeishuEmulator({KEY: Bot(secret=SIGNING)}, per_second=1000, per_minute=10**6) as emu:
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _slack() -> Iterator[SlackEmulator]:
    with SlackEmulator(rate_per_s=None) as emu:
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _teams() -> Iterator[TeamsEmulator]:
    with TeamsEmulator(rate_per_s=None) as emu:
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _discord() -> Iterator[DiscordEmulator]:
    with DiscordEmulator(bucket_limit=None) as emu:
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _telegram() -> Iterator[TelegramEmulator]:
    with TelegramEmulator(BOT_TOKEN, per_chat_per_s=None, group_per_min=None) as emu:
        emu.add_chat(CHAT, "supergroup")  # type: ignore[attr-defined]
        yield emu  # type: ignore[misc]


@contextlib.contextmanager
def _smtp() -> Iterator[SmtpEmulator]:
    with SmtpEmulator(credentials=(SMTP_USER, SMTP_PASSWORD)) as emu:
        yield emu


@contextlib.contextmanager
def _apprise() -> Iterator[Sink]:
    pytest.importorskip("apprise")
    with Sink() as sink:
        yield sink


# --- the rows -------------------------------------------------------------------------------


def _json_titles(sink: Sink, path: str, key: str) -> list[str]:
    return [str(r.json()[key]) for r in sink.requests(path) if r.body]


def _webhook_texts(sink: Sink) -> list[str]:
    return [r.text() for r in sink.requests("/hook")]


WEBHOOK = Row(
    kind="webhook",
    start=_sink,
    config=lambda sink: {
        "url": sink.url("/hook"),
        "secret": WHSEC,
        "headers": {"Authorization": f"Bearer {CANARY}-bearer"},
    },
    unreachable=lambda port: {"url": f"http://127.0.0.1:{port}/hook", "secret": WHSEC},
    example={
        "url": f"https://bot:{CANARY}-pw@receiver.example/hook?token={CANARY}-query&page=1",
        "secret": WHSEC,
        "headers": {"X-Api-Key": f"{CANARY}-api-key"},
    },
    hang=lambda sink, s: sink.script("/hook", Answer(delay_s=s)),
    echo=lambda sink: sink.script(
        "/hook", Answer(500, f"refused Bearer {CANARY}-bearer, key {WHSEC}")
    ),
    answers={
        "delivered": (lambda sink: sink.script("/hook", Answer(200)), Delivered),
        "retry": (lambda sink: sink.script("/hook", Answer(503, "down")), Retry),
        "rate_limited": (
            lambda sink: sink.script("/hook", Answer(429, "slow", headers={"Retry-After": "7"})),
            RateLimited,
        ),
        "reject": (lambda sink: sink.script("/hook", Answer(404, "no such hook")), Reject),
    },
    sent_sizes=lambda sink: [len(r.body) for r in sink.requests("/hook")],
    texts=_webhook_texts,
)

WECOM = Row(
    kind="wecom",
    start=_wecom,
    config=lambda emu: {"webhook_url": emu.webhook_url(KEY)},
    unreachable=lambda port: {
        "webhook_url": f"http://127.0.0.1:{port}/cgi-bin/webhook/send?key={KEY}"
    },
    example={"webhook_url": f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={KEY}"},
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.fail_next(93004, f"webhook disabled: {emu.webhook_url(KEY)} {KEY}"),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.fail_next(-1), Retry),
        "rate_limited": (lambda emu: emu.fail_next(45009), RateLimited),
        "reject": (lambda emu: emu.fail_next(93004), Reject),
    },
    sent_sizes=lambda emu: [len(c.encode()) for c in emu.contents()],
    texts=lambda emu: emu.contents(),
)

DINGTALK = Row(
    kind="dingtalk",
    start=_dingtalk,
    config=lambda emu: {"webhook_url": emu.webhook_url(KEY), "secret": SIGNING},
    unreachable=lambda port: {
        "webhook_url": f"http://127.0.0.1:{port}/robot/send?access_token={KEY}",
        "secret": SIGNING,
    },
    example={
        "webhook_url": f"https://oapi.dingtalk.com/robot/send?access_token={KEY}",
        "secret": SIGNING,
    },
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.fail_next(310000, f"sign not match: {SIGNING} {emu.webhook_url(KEY)}"),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.fail_next(-1), Retry),
        "rate_limited": (lambda emu: emu.fail_next(130101), RateLimited),
        "reject": (lambda emu: emu.fail_next(310000, "keywords not in content"), Reject),
    },
    sent_sizes=lambda emu: [len(r.body) for r in emu.requests()],
    texts=lambda emu: [m["markdown"]["text"] for m in emu.accepted],
)

FEISHU = Row(
    kind="feishu",
    start=_feishu,
    config=lambda emu: {"webhook_url": emu.webhook_url(KEY), "secret": SIGNING},
    unreachable=lambda port: {
        "webhook_url": f"http://127.0.0.1:{port}/open-apis/bot/v2/hook/{KEY}",
        "secret": SIGNING,
    },
    example={
        "webhook_url": f"https://open.feishu.cn/open-apis/bot/v2/hook/{KEY}",
        "secret": SIGNING,
    },
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.fail_next(19021, f"sign match fail: {SIGNING} {emu.webhook_url(KEY)}"),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.answer_next(502, "bad gateway"), Retry),
        "rate_limited": (lambda emu: emu.fail_next(11232), RateLimited),
        "reject": (lambda emu: emu.fail_next(19024), Reject),
    },
    sent_sizes=lambda emu: [len(r.body) for r in emu.requests()],
    texts=lambda emu: [m["card"]["body"]["elements"][0]["content"] for m in emu.accepted],
)

SLACK = Row(
    kind="slack",
    start=_slack,
    config=lambda emu: {"webhook_url": emu.webhook_url(KEY)},
    unreachable=lambda port: {"webhook_url": f"http://127.0.0.1:{port}/services/T1/B1/{KEY}"},
    example={"webhook_url": f"https://hooks.slack.com/services/T0001/B0001/{KEY}"},
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.echo_next(500),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.answer_next(503, "down"), Retry),
        "rate_limited": (
            lambda emu: emu.answer_next(429, '{"ok":false}', {"Retry-After": "7"}),
            RateLimited,
        ),
        "reject": (lambda emu: emu.fail_next("channel_not_found"), Reject),
    },
    sent_sizes=lambda emu: [len(t) for t in emu.texts()],
    texts=lambda emu: emu.texts(),
)

TEAMS = Row(
    kind="teams",
    start=_teams,
    config=lambda emu: {"webhook_url": emu.flow_url(KEY)},
    unreachable=lambda port: {
        "webhook_url": f"http://127.0.0.1:{port}/workflows/1/triggers/manual/paths/invoke"
        f"?sv=1.0&sig={KEY}"
    },
    example={
        "webhook_url": "https://prod-01.westeurope.logic.azure.com:443/workflows/abc/triggers/"
        f"manual/paths/invoke?api-version=2016-06-01&sv=1.0&sig={KEY}"
    },
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.echo_next(500),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.answer_next(500), Retry),
        "rate_limited": (lambda emu: emu.answer_next(429), RateLimited),
        "reject": (lambda emu: emu.answer_next(404), Reject),
    },
    sent_sizes=lambda emu: [len(r.body) for r in emu.requests()],
    texts=lambda emu: emu.texts(),
)

DISCORD = Row(
    kind="discord",
    start=_discord,
    config=lambda emu: {"webhook_url": emu.webhook_url(KEY)},
    unreachable=lambda port: {"webhook_url": f"http://127.0.0.1:{port}/api/webhooks/1/{KEY}"},
    example={"webhook_url": f"https://discord.com/api/webhooks/123456789/{KEY}"},
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.echo_next(500),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.fail_next(0, status=502), Retry),
        "rate_limited": (lambda emu: emu.rate_limit_next(1.25), RateLimited),
        "reject": (lambda emu: emu.fail_next(50035), Reject),
    },
    sent_sizes=lambda emu: [len(c) for c in emu.contents()],
    texts=lambda emu: emu.contents(),
)

TELEGRAM = Row(
    kind="telegram",
    start=_telegram,
    config=lambda emu: {"bot_token": BOT_TOKEN, "chat_id": CHAT, "api_base": emu.url("")},
    unreachable=lambda port: {
        "bot_token": BOT_TOKEN,
        "chat_id": CHAT,
        "api_base": f"http://127.0.0.1:{port}",
    },
    example={"bot_token": BOT_TOKEN, "chat_id": "@alerts_channel"},
    hang=lambda emu, s: emu.hang_next(s),
    echo=lambda emu: emu.fail_next(400, f"Bad Request: no access with /bot{BOT_TOKEN}/x"),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.fail_next(500, "Internal Server Error"), Retry),
        "rate_limited": (
            lambda emu: emu.fail_next(429, "Too Many Requests", parameters={"retry_after": 3}),
            RateLimited,
        ),
        "reject": (lambda emu: emu.fail_next(400, "Bad Request: chat not found"), Reject),
    },
    sent_sizes=lambda emu: [utf16_units(m.plain) for m in emu.messages()],
    texts=lambda emu: [m.plain for m in emu.messages()],
)


def _smtp_config(emu: SmtpEmulator) -> dict[str, Any]:
    return {
        "host": "localhost",
        "port": emu.port,
        "security": emu.security,
        "sender": f"Tidings <{SMTP_USER}>",
        "recipients": ["ops@example.com", "sec@example.com"],
        "ca_file": emu.ca_file,
        "username": SMTP_USER,
        "password": SMTP_PASSWORD,
    }


EMAIL = Row(
    kind="email",
    start=_smtp,
    config=_smtp_config,
    unreachable=lambda port: {
        "host": "127.0.0.1",
        "port": port,
        "security": "tls",
        "sender": SMTP_USER,
        "recipients": ["ops@example.com"],
        "username": SMTP_USER,
        "password": SMTP_PASSWORD,
    },
    example={
        "host": "smtp.example.com",
        "sender": SMTP_USER,
        "recipients": "ops@example.com, sec@example.com",
        "username": SMTP_USER,
        "password": SMTP_PASSWORD,
    },
    hang=lambda emu, s: emu.hang_next("RCPT", s),
    echo=lambda emu: emu.fail_next("DATA", f"554 5.7.1 password {SMTP_PASSWORD} not welcome"),
    answers={
        "delivered": (lambda emu: None, Delivered),
        "retry": (lambda emu: emu.fail_next("MAIL", "451 4.3.0 Local error"), Retry),
        "reject": (lambda emu: emu.fail_next("DATA", "554 5.7.1 Rejected as spam"), Reject),
    },
    sent_sizes=lambda emu: [len(m.data) for m in emu.received()],
    texts=lambda emu: [str(m.message["Subject"]) for m in emu.received()],
)

APPRISE_PATH = f"/notify/{CANARY}"

APPRISE = Row(
    kind="apprise",
    start=_apprise,
    config=lambda sink: {"urls": [f"json://127.0.0.1:{sink.port}{APPRISE_PATH}"]},
    unreachable=lambda port: {"urls": [f"json://127.0.0.1:{port}{APPRISE_PATH}"]},
    example={"urls": [f"json://receiver.example{APPRISE_PATH}", "json://other.example/x"]},
    hang=lambda sink, s: sink.script(APPRISE_PATH, Answer(delay_s=s)),
    echo=lambda sink: sink.script(APPRISE_PATH, Answer(500, f"no such token {CANARY}")),
    # Apprise cannot tell a throttle or a permanent refusal from any other failure.
    answers={
        "delivered": (lambda sink: sink.script(APPRISE_PATH, Answer(200)), Delivered),
        "retry": (lambda sink: sink.script(APPRISE_PATH, Answer(500, "boom")), Retry),
    },
    sent_sizes=lambda sink: [len(r.json()["message"]) for r in sink.requests(APPRISE_PATH)],
    texts=lambda sink: _json_titles(sink, APPRISE_PATH, "message"),
    # Apprise reports its services' timeouts and refusals as failures it cannot explain.
    timeout_reason=None,
    refused_reason=None,
)

ROWS = [WEBHOOK, WECOM, DINGTALK, FEISHU, SLACK, TEAMS, DISCORD, TELEGRAM, EMAIL, APPRISE]
