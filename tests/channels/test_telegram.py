"""The `telegram` kind against its emulator: every documented answer, the supergroup migration,
rate limits, the 4096 visible-UTF-16-unit limit with MarkdownV2 that still parses, secrets.
The checks every kind passes are in test_conformance.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tidings
from tests.channels.harness import (
    CANARY,
    LOOPBACK,
    Case,
    assert_no_secret,
    assert_redacted,
    assert_within_limit,
    channel,
    event,
    run_table,
    send_one,
)
from tests.dispatch.helpers import running, settled
from tests.emulators.telegram import TelegramEmulator, parse_markdown_v2, utf16_units
from tidings.channels.base import SendContext, Target
from tidings.channels.http import HttpClient
from tidings.channels.telegram import TelegramAdapter, shorten_markdown_v2
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.core.states import State
from tidings.dispatch.sending import render_single

TOKEN = f"123456:{CANARY}-AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
CHAT = -1001234567890
ADAPTER = TelegramAdapter()


@pytest.fixture
def emulator() -> Iterator[TelegramEmulator]:
    with TelegramEmulator(TOKEN, per_chat_per_s=None, group_per_min=None) as emu:
        emu.add_chat(CHAT, "supergroup")
        yield emu  # type: ignore[misc]


def tg_channel(emu: TelegramEmulator, **config: Any) -> Channel:
    values = {"bot_token": TOKEN, "chat_id": CHAT, "api_base": emu.url("")} | config
    return channel("telegram", ADAPTER.validate_config(values))


def reason(expected: Reason) -> Any:
    return lambda outcome: outcome.reason is expected


# --- every documented answer ------------------------------------------------------------------


async def test_answer_table(emulator: TelegramEmulator) -> None:
    fail = emulator.fail_next
    cases = [
        Case("delivered", lambda: None, Delivered),
        Case(
            "429 with parameters.retry_after",
            lambda: fail(429, "Too Many Requests: retry after 34", parameters={"retry_after": 34}),
            RateLimited,
            lambda o: o.retry_after_s == 34,
        ),
        Case(
            "429 with only a Retry-After header",
            lambda: fail(429, "Too Many Requests", headers={"Retry-After": "7"}),
            RateLimited,
            lambda o: o.retry_after_s == 7,
        ),
        Case(
            "400 chat not found",
            lambda: fail(400, "Bad Request: chat not found"),
            Reject,
            reason(Reason.INVALID_TARGET),
        ),
        Case(
            "400 can't parse entities",
            lambda: fail(400, "Bad Request: can't parse entities: Character '.' is reserved"),
            Reject,
            reason(Reason.CLIENT_ERROR),
        ),
        Case(
            "400 message is too long",
            lambda: fail(400, "Bad Request: message is too long"),
            Reject,
            reason(Reason.TOO_LARGE),
        ),
        Case(
            "400 text is too long",
            lambda: fail(400, "Bad Request: text is too long"),
            Reject,
            reason(Reason.TOO_LARGE),
        ),
        Case(
            "401 bad token",
            lambda: fail(401, "Unauthorized"),
            Reject,
            reason(Reason.AUTH),
        ),
        Case(
            "403 blocked by the user",
            lambda: fail(403, "Forbidden: bot was blocked by the user"),
            Reject,
            reason(Reason.INVALID_TARGET),
        ),
        Case(
            "403 kicked from the group",
            lambda: fail(403, "Forbidden: bot was kicked from the group chat"),
            Reject,
            reason(Reason.INVALID_TARGET),
        ),
        Case(
            "403 can't initiate conversation",
            lambda: fail(403, "Forbidden: bot can't initiate conversation with a user"),
            Reject,
            reason(Reason.INVALID_TARGET),
        ),
        Case("404 not found", lambda: fail(404, "Not Found"), Reject),
        Case(
            "500",
            lambda: fail(500, "Internal Server Error"),
            Retry,
            reason(Reason.SERVER_ERROR),
        ),
        Case(
            "502 from the proxy, HTML",
            lambda: fail(502, body="<html><body>502 Bad Gateway</body></html>"),
            Retry,
            reason(Reason.SERVER_ERROR),
        ),
        Case(
            "503 with Retry-After",
            lambda: fail(503, "Service Unavailable", headers={"Retry-After": "5"}),
            Retry,
            lambda o: o.retry_after_s == 5,
        ),
        Case(
            "200 but ok: false is never success",
            lambda: fail(200, "Internal error"),
            Retry,
            reason(Reason.VENDOR_ERROR),
        ),
        Case(
            "200 ok: false with a known error_code",
            lambda: fail(200, body={"ok": False, "error_code": 400, "description": "Bad"}),
            Reject,
        ),
        Case(
            "200 that is not JSON",
            lambda: fail(200, body="<html>maintenance</html>"),
            Retry,
            reason(Reason.UNEXPECTED),
        ),
    ]
    await run_table(ADAPTER, tg_channel(emulator), cases)
    assert len(emulator.messages()) == 1  # only the first case reached the chat


async def test_error_carries_telegrams_words(emulator: TelegramEmulator) -> None:
    emulator.fail_next(400, "Bad Request: chat not found")
    outcome = await send_one(ADAPTER, tg_channel(emulator))
    assert isinstance(outcome, Reject)
    assert outcome.error == "Telegram 400: Bad Request: chat not found"
    assert outcome.provider_response is not None
    assert "chat not found" in outcome.provider_response


# --- the emulator's own behaviour -------------------------------------------------------------


async def test_unknown_chat_blocked_and_bad_token(emulator: TelegramEmulator) -> None:
    unknown = await send_one(ADAPTER, tg_channel(emulator, chat_id=42))
    assert isinstance(unknown, Reject)
    assert unknown.reason is Reason.INVALID_TARGET
    emulator.add_chat(7, "private")
    emulator.block(7)
    blocked = await send_one(ADAPTER, tg_channel(emulator, chat_id=7))
    assert isinstance(blocked, Reject)
    assert "blocked" in blocked.error
    bad = await send_one(ADAPTER, tg_channel(emulator, bot_token="1:wrong"))
    assert isinstance(bad, Reject)
    assert bad.reason is Reason.AUTH
    assert emulator.messages() == []


async def test_payload_is_what_telegram_parses(emulator: TelegramEmulator) -> None:
    nasty = event(title="v1.2 [beta] *wow* _x_ (a) {b} #c +d -e =f |g| !h `i` ~j > k \\ l")
    ch = tg_channel(emulator)
    outcome = await send_one(
        ADAPTER, ch, ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [nasty])
    )
    assert isinstance(outcome, Delivered), outcome
    (request,) = emulator.requests()
    assert request.path == f"/bot{TOKEN}/sendMessage"
    body = json.loads(request.body)
    assert body["chat_id"] == CHAT
    assert body["parse_mode"] == "MarkdownV2"
    assert body["link_preview_options"] == {"is_disabled": True}
    (sent,) = emulator.messages()
    assert sent.plain.startswith(nasty.title + "\n")  # every reserved character escaped


async def test_broken_template_override_is_refused_by_the_parser(
    emulator: TelegramEmulator,
) -> None:
    ch = tg_channel(emulator)
    ch = channel("telegram", ch.config, templates={"event": "{{ event.title }}. done"})
    outcome = await send_one(
        ADAPTER, ch, ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event()])
    )
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.CLIENT_ERROR
    assert "Character '.' is reserved" in outcome.error


async def test_per_chat_rate_limit_gives_retry_after() -> None:
    with TelegramEmulator(TOKEN, per_chat_per_s=1.0, chat_burst=2, group_per_min=None) as emu:
        emu.add_chat(5, "private")
        ch = tg_channel(emu, chat_id=5)  # type: ignore[arg-type]
        outcomes = [await send_one(ADAPTER, ch) for _ in range(3)]
    assert [type(o) for o in outcomes] == [Delivered, Delivered, RateLimited]
    assert outcomes[2].retry_after_s == 1  # type: ignore[union-attr]


async def test_group_rate_limit_20_per_minute() -> None:
    with TelegramEmulator(TOKEN, per_chat_per_s=None, group_per_min=20) as emu:
        emu.add_chat(CHAT, "group")
        ch = tg_channel(emu)  # type: ignore[arg-type]
        outcomes = [await send_one(ADAPTER, ch) for _ in range(21)]
    assert all(isinstance(o, Delivered) for o in outcomes[:20])
    limited = outcomes[20]
    assert isinstance(limited, RateLimited)
    assert limited.retry_after_s is not None
    assert 55 <= limited.retry_after_s <= 60


# --- supergroup migration ---------------------------------------------------------------------


class RecordingStore:
    def __init__(self) -> None:
        self.changes: list[tuple[int, dict[str, Any]]] = []

    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        self.changes.append((channel_id, changes))

    async def inbox_put(self, *args: object) -> None:
        raise AssertionError("telegram does not use the inbox")


async def send_with(store: RecordingStore, ch: Channel) -> Outcome:
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event()])
    async with HttpClient(allowed_networks=LOOPBACK) as http:
        ctx = SendContext(http=http, store=store, attempt_at=datetime.now(UTC))
        return await ADAPTER.send(ctx, ch, message)


async def test_migrated_group_is_followed_and_remembered(emulator: TelegramEmulator) -> None:
    emulator.migrate(-4000, CHAT)
    store = RecordingStore()
    outcome = await send_with(store, tg_channel(emulator, chat_id=-4000))
    assert isinstance(outcome, Delivered), outcome
    assert store.changes == [(1, {"chat_id": CHAT})]
    first, second = (json.loads(r.body)["chat_id"] for r in emulator.requests())
    assert (first, second) == (-4000, CHAT)
    assert [m.chat_id for m in emulator.messages()] == [str(CHAT)]


async def test_migration_resends_only_once(emulator: TelegramEmulator) -> None:
    emulator.migrate(-4000, -5000)
    emulator.migrate(-5000, CHAT)
    store = RecordingStore()
    outcome = await send_with(store, tg_channel(emulator, chat_id=-4000))
    assert isinstance(outcome, Reject)
    assert "migrated again" in outcome.error
    assert len(emulator.requests()) == 2
    assert store.changes == [(1, {"chat_id": -5000})]


# --- timeouts, connection failures, secrets ----------------------------------------------------


async def test_blocked_address_names_no_token() -> None:
    ch = channel("telegram", {"bot_token": TOKEN, "chat_id": CHAT, "api_base": "http://10.0.0.1"})
    async with HttpClient() as http:
        ctx = SendContext(http=http, store=RecordingStore(), attempt_at=datetime.now(UTC))
        outcome = await ADAPTER.send(
            ctx, ch, ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event()])
        )
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.BLOCKED_ADDRESS
    assert_no_secret(outcome, ch, ADAPTER)


def test_config_is_validated_and_redacted() -> None:
    good = {"bot_token": TOKEN, "chat_id": "@alerts_channel", "api_base": "http://x/"}
    assert ADAPTER.validate_config(good)["api_base"] == "http://x"
    assert_redacted(ADAPTER, good)
    bad_cases = [
        ({"bot_token": f"not a token {CANARY}", "chat_id": 1}, "config.bot_token"),
        ({"bot_token": TOKEN}, "config.chat_id"),
        ({"bot_token": TOKEN, "chat_id": True}, "config.chat_id"),
        ({"bot_token": TOKEN, "chat_id": "alerts"}, "config.chat_id"),
        ({"bot_token": TOKEN, "chat_id": 1, "api_base": "ftp://x"}, "config.api_base"),
        ({"bot_token": TOKEN, "chat_id": 1, "api_base": "http://x/?a=1"}, "config.api_base"),
    ]
    for config, field in bad_cases:
        with pytest.raises(ValidationError) as caught:
            ADAPTER.validate_config(config)
        assert caught.value.field == field
        assert CANARY not in str(caught.value)


def test_declared_limits() -> None:
    """4096 of what a reader sees, counted in UTF-16 code units (never fewer than code points)."""
    spec = ADAPTER.spec
    assert spec.limit == SizeLimit(4096, SizeUnit.UTF16_UNITS)
    assert spec.flavour == "telegram_markdown_v2"
    assert 0 < spec.default_rate_per_min < 20  # a group takes 20/min


# --- the 4096 limit -----------------------------------------------------------------------------


def visible(text: str) -> int:
    return utf16_units(parse_markdown_v2(text))


async def test_digest_parts_fit_parse_and_arrive(emulator: TelegramEmulator) -> None:
    ch = tg_channel(emulator)
    events = [
        event(i, title=f"host-{i}.example.com is down! (ping {'.' * (i % 50)})")
        for i in range(1, 120)
    ]
    events.append(event(500, title="🔥" * 3000))  # one entry too long on its own
    messages = assert_within_limit(ADAPTER, ch, events)
    assert len(messages) > 2
    for message in messages:
        assert message.size == visible(message.text) <= 4096
        assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert len(emulator.messages()) == len(messages)


async def test_long_single_event_is_shortened_and_accepted(emulator: TelegramEmulator) -> None:
    ch = tg_channel(emulator)
    message = render_single(
        ADAPTER, ch, Target((1,), message_id="msg_t1"), event(body="a_b.c*d" * 2000)
    )
    assert message.size <= 4096
    assert message.text.startswith("*SQL injection")
    assert "…" in message.text
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)


async def test_emulator_refuses_over_4096_visible(emulator: TelegramEmulator) -> None:
    ch = tg_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(body="x" * 5000)]
    )  # not shortened
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.TOO_LARGE


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("*bold text here*", 6, "*bold …*"),
        ("_it __under text__ x_", 8, "_it __unde…__**_"),
        ("__u _it text_ x__", 6, "__u _it …_**__"),
        ("[a long link text](https://x.example/\\))", 5, "[a lo…](https://x.example/\\))"),
        ("ab\\.cd `code block` tail", 8, "ab\\.cd …"),
        ("plain", 10, "plain…"),
    ],
)
def test_shorten_closes_what_it_cut_open(text: str, limit: int, expected: str) -> None:
    shortened = shorten_markdown_v2(text, limit)
    assert shortened == expected
    assert visible(shortened) <= limit


_TEXT = st.text(
    alphabet=st.sampled_from(list("ab _*[]()~`>#+-=|{}.!\\\n😀é"))
    | st.characters(codec="utf-8", exclude_categories=("Cs",)),
    max_size=300,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(title=_TEXT, body=_TEXT, limit=st.integers(min_value=20, max_value=400))
def test_any_event_renders_to_text_telegram_parses_within_the_limit(
    title: str, body: str, limit: int
) -> None:
    ch = channel("telegram", {"bot_token": TOKEN, "chat_id": CHAT})
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(title=title, body=body)])
    # \r is ignored by Telegram; the adapter counts it (an upper bound)
    assert visible(message.text) <= message.size <= visible(message.text) + message.text.count("\r")
    short = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(title=title, body=body)], shorten_to=limit
    )
    assert short.size <= limit
    assert visible(short.text) <= limit


# --- end to end ---------------------------------------------------------------------------------


async def test_end_to_end_through_a_dispatcher(hub: tidings.Hub) -> None:
    with TelegramEmulator(TOKEN) as emu:
        emu.migrate(-4000, CHAT)  # the group was upgraded: followed and remembered
        created = await hub.channels.create(
            name="tg",
            kind="telegram",
            config={"bot_token": TOKEN, "chat_id": -4000, "api_base": emu.url("")},
            timeout_s=2,
            retry_backoff_s=0.05,
        )
        async with running(hub):
            await hub.publish(
                kind="monitor.down", subject="db:1", severity="high", title="db1 down."
            )
            (row,) = await settled(hub, 1)
        sent = emu.messages()
    assert row.state == State.SENT
    assert [(m.chat_id, m.plain.splitlines()[0]) for m in sent] == [(str(CHAT), "db1 down.")]
    assert (await hub.channels.get(created.id)).config["chat_id"] == CHAT
