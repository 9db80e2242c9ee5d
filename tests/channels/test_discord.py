"""The `discord` kind against its emulator: `wait=true` always sent (and the rest of the query
kept), mentions never parsed, every documented code classified (10015 disables the channel),
429's float `retry_after` honoured with its scope, the 2000-character content limit and the
webhook's bucket respected, the token alone never leaking. The checks every kind passes
are in test_conformance.py.
"""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Callable, Iterator

import pytest

import tidings
from tests.channels.harness import (
    CANARY,
    Case,
    assert_no_secret,
    assert_redacted,
    channel,
    event,
    run_table,
    send_one,
)
from tests.emulators.discord import MESSAGES, DiscordEmulator
from tidings.channels.base import Target
from tidings.channels.discord import CODES, DEFAULT_RATE_PER_MIN, DiscordAdapter, with_wait
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

TOKEN = f"{CANARY}-discord-token"
ADAPTER = DiscordAdapter()


@pytest.fixture
def emulator() -> Iterator[DiscordEmulator]:
    # No bucket by default: the tables send many messages back to back.
    with DiscordEmulator(bucket_limit=None) as emu:
        assert isinstance(emu, DiscordEmulator)
        yield emu


def discord_channel(emu: DiscordEmulator, token: str = TOKEN, **fields: object) -> tidings.Channel:
    return channel("discord", {"webhook_url": emu.webhook_url(token)}, **fields)


def is_reject(reason: Reason, *, disable: bool = False) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Reject) and (o.reason, o.disable_channel) == (reason, disable)


def is_retry(reason: Reason, hint: float | None = None) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Retry) and (o.reason, o.retry_after_s) == (reason, hint)


def is_limited(hint: float | None, error: str) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, RateLimited) and (o.retry_after_s, o.error) == (hint, error)


def says(code: int, check: Callable[[Outcome], bool]) -> Callable[[Outcome], bool]:
    return lambda o: check(o) and f"{MESSAGES[code]} (code {code})" in getattr(o, "error", "")


# JSON code -> (expected outcome type, check): written out here, independent of the module's
# table, so a change to the table must change a test too.
EXPECTED = {
    10015: (Reject, is_reject(Reason.GONE, disable=True)),
    50027: (Reject, is_reject(Reason.AUTH, disable=True)),
    50001: (Reject, is_reject(Reason.AUTH)),
    50006: (Reject, is_reject(Reason.CLIENT_ERROR)),
    50035: (Reject, is_reject(Reason.CLIENT_ERROR)),
    40005: (Reject, is_reject(Reason.TOO_LARGE)),
}


def test_the_code_table_is_covered() -> None:
    assert set(CODES) == set(EXPECTED)


def test_declared_limits() -> None:
    spec = DiscordAdapter.spec
    assert spec.limit == SizeLimit(2000, SizeUnit.TEXT_CHARS)
    assert spec.flavour == Flavour.DISCORD_MARKDOWN
    assert spec.default_rate_per_min == DEFAULT_RATE_PER_MIN < 30


async def test_every_documented_answer(emulator: DiscordEmulator) -> None:
    ch = discord_channel(emulator)
    cases = [Case("200 with the message", lambda: None, Delivered)]
    for code, (expected, check) in EXPECTED.items():
        arrange = functools.partial(emulator.fail_next, code)
        cases.append(Case(str(code), arrange, expected, says(code, check)))
        # The code decides over the status it comes with.
        odd = functools.partial(emulator.fail_next, code, status=500)
        cases.append(Case(f"{code} with a 500", odd, expected, says(code, check)))
    limited = "HTTP 429: You are being rate limited. (scope: user)"
    global_ = "HTTP 429: You are being rate limited. (scope: global)"
    header_only = "HTTP 429: rate limited (scope: user)"
    emu = emulator
    rows: list[tuple[str, Callable[[], None], type, Callable[[Outcome], bool]]] = [
        (
            "429, body and header",
            functools.partial(emu.rate_limit_next, 1.25),
            RateLimited,
            is_limited(1.25, limited),
        ),
        (
            "429, global",
            functools.partial(emu.rate_limit_next, 3.5, global_=True),
            RateLimited,
            is_limited(3.5, global_),
        ),
        (
            "429, header only",
            functools.partial(emu.rate_limit_next, 2.2, body=False),
            RateLimited,
            is_limited(3.0, header_only),
        ),
        (
            "502",
            functools.partial(emu.fail_next, 0, status=502),
            Retry,
            is_retry(Reason.SERVER_ERROR),
        ),
        (
            "503 with Retry-After",
            functools.partial(emu.answer_next, 503, "upstream", {"Retry-After": "4"}),
            Retry,
            is_retry(Reason.SERVER_ERROR, 4.0),
        ),
        (
            "401 without a code",
            functools.partial(emu.answer_next, 401, '{"message": "401: Unauthorized"}'),
            Reject,
            is_reject(Reason.AUTH),
        ),
        (
            "an unlisted 400 code",
            functools.partial(emu.fail_next, 50109),
            Reject,
            is_reject(Reason.CLIENT_ERROR),
        ),
        ("204", functools.partial(emu.answer_next, 204, ""), Delivered, lambda o: True),
        (
            "200 carrying an error object",
            functools.partial(emu.answer_next, 200, '{"code": 1, "message": "odd"}'),
            Retry,
            is_retry(Reason.VENDOR_ERROR),
        ),
        (
            "200 without the message",
            functools.partial(emu.answer_next, 200, "<html>proxy</html>"),
            Retry,
            is_retry(Reason.UNEXPECTED),
        ),
        (
            "redirect",
            functools.partial(emu.answer_next, 301, "", {"Location": "http://x/"}),
            Reject,
            is_reject(Reason.REDIRECT),
        ),
    ]
    cases += [Case(*row) for row in rows]
    await run_table(ADAPTER, ch, cases)


async def test_invalid_form_body_names_the_field(emulator: DiscordEmulator) -> None:
    ch = discord_channel(emulator)
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1, body="x" * 2100)])
    assert message.size > 2000  # unshortened: what the limit protects against
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.CLIENT_ERROR
    assert outcome.error.startswith('HTTP 400: Invalid Form Body (code 50035) {"content":')
    assert "BASE_TYPE_MAX_LENGTH" in outcome.error
    assert emulator.messages == []


async def test_a_deleted_webhook_or_a_wrong_token_disables_the_channel(
    emulator: DiscordEmulator,
) -> None:
    ch = discord_channel(emulator)
    emulator.delete()
    outcome = await send_one(ADAPTER, ch)
    assert outcome == Reject(
        Reason.GONE,
        "HTTP 404: Unknown Webhook (code 10015)",
        '{"message": "Unknown Webhook", "code": 10015}',
        disable_channel=True,
    )
    url = emulator.webhook_url(TOKEN).replace(TOKEN, "t" * 20)
    bad_token = await send_one(ADAPTER, channel("discord", {"webhook_url": url}))
    assert isinstance(bad_token, Reject)
    assert (bad_token.reason, bad_token.disable_channel) == (Reason.AUTH, True)
    assert "Invalid Webhook Token (code 50027)" in bad_token.error


async def test_wait_is_always_true_and_the_query_is_kept(emulator: DiscordEmulator) -> None:
    base = emulator.webhook_url(TOKEN)
    for url in (base, f"{base}?wait=false", f"{base}?thread_id=42&wait=0#frag"):
        ch = channel("discord", {"webhook_url": url})
        outcome = await send_one(ADAPTER, ch)
        assert isinstance(outcome, Delivered)
        assert outcome.provider_response is not None
        assert json.loads(outcome.provider_response)["id"]  # the created message
    assert [r.query for r in emulator.requests()] == [
        {"wait": "true"},
        {"wait": "true"},
        {"thread_id": "42", "wait": "true"},
    ]
    keeps = with_wait("https://d/api/webhooks/1/t?a=1&b=%2F")
    assert keeps == "https://d/api/webhooks/1/t?a=1&b=%2F&wait=true"


async def test_payload_never_pings(emulator: DiscordEmulator) -> None:
    ch = discord_channel(emulator)
    loud = event(1, title="@everyone db1 is down @here", body="<@123> *x*")
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [loud])
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    (received,) = emulator.requests()
    assert received.headers["content-type"].startswith("application/json")
    document = json.loads(received.body)
    assert document == {"content": message.text, "allowed_mentions": {"parse": []}}
    (created,) = emulator.messages
    assert created["mention_everyone"] is False
    assert message.size == len(message.text)
    # The emulator's own check can fail: the same text with mentions parsed would ping.
    pinging = {"content": "@everyone hi", "allowed_mentions": {"parse": ["everyone"]}}
    assert emulator._message("1", pinging)["mention_everyone"] is True


async def test_a_long_event_is_shortened_and_accepted(emulator: DiscordEmulator) -> None:
    ch = discord_channel(emulator)
    big = event(1, title="disk *full*", body="ligne ~~x~~ | " * 400)
    message = render_single(ADAPTER, ch, Target((1,), message_id="msg_t1"), big)
    assert 1900 < message.size <= 2000
    assert message.text.endswith("…")
    assert "disk \\*full\\*" in message.text.splitlines()[0]  # the title survives the cut
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert len(emulator.messages) == 1


async def test_the_webhooks_bucket_is_a_rate_limit() -> None:
    with DiscordEmulator(bucket_limit=2, bucket_window_s=2.0) as emu:
        assert isinstance(emu, DiscordEmulator)
        ch = discord_channel(emu)
        outcomes = [await send_one(ADAPTER, ch) for _ in range(3)]
        first = emu.requests()[0]
    assert [type(o) for o in outcomes] == [Delivered, Delivered, RateLimited]
    limited = outcomes[2]
    assert isinstance(limited, RateLimited)
    assert limited.retry_after_s is not None
    assert 0 < limited.retry_after_s <= 2.0  # the body's float, not the header's rounding
    assert [status for status, _ in emu.answers] == [200, 200, 429]
    assert first.query == {"wait": "true"}


async def test_the_token_never_leaks(emulator: DiscordEmulator) -> None:
    ch = discord_channel(emulator)
    emulator.echo_next(500)  # an answer quoting the whole URL
    echoed = await send_one(ADAPTER, ch)
    emulator.answer_next(401, json.dumps({"message": f"bad token {TOKEN}", "code": 50027}))
    quoted = await send_one(ADAPTER, ch)  # quoting the token alone
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    url = f"http://127.0.0.1:{closed}/api/webhooks/1/{TOKEN}"
    gone = channel("discord", {"webhook_url": url})
    refused = await send_one(ADAPTER, gone)
    assert isinstance(echoed, Retry)
    assert isinstance(quoted, Reject)
    assert isinstance(refused, Retry)
    for outcome, sent_to in ((echoed, ch), (quoted, ch), (refused, gone)):
        assert_no_secret(outcome, sent_to, ADAPTER)
        assert CANARY not in str(outcome)
    assert "••••" in quoted.error


def test_config_is_validated_and_redacted() -> None:
    good = {"webhook_url": f"https://discord.com/api/webhooks/123456789/{TOKEN}"}
    assert ADAPTER.validate_config(good) == good
    assert_redacted(ADAPTER, good)
    bad_urls: tuple[dict[str, str], ...] = (
        {},
        {"webhook_url": "ftp://x"},
        {"webhook_url": "https://discord.com/api/webhooks/"},
        {"webhook_url": f"https://discord.com/api/channels/1/{CANARY}"},
    )
    for bad in bad_urls:
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config(bad)
        assert info.value.field == "config.webhook_url"
        assert CANARY not in str(info.value)
    with pytest.raises(ValidationError) as extra:
        ADAPTER.validate_config(good | {"username": "bot"})
    assert extra.value.field == "config.username"
