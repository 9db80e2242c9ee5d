"""The `feishu` kind against its emulator: every documented code classified (in a 200 and, for
9499, in a 4xx), signing in the body verified by the bot, the 20,000-byte body limit and the
5/s rate honoured. The checks every kind passes are in test_conformance.py.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator

import pytest

import tidings
from tests.channels.harness import (
    CANARY,
    Case,
    assert_redacted,
    channel,
    event,
    run_table,
    send_one,
)
from tests.emulators.feishu import Bot, FeishuEmulator, expected_sign
from tidings.channels.base import Target
from tidings.channels.feishu import CODES, DEFAULT_RATE_PER_MIN, FeishuAdapter, sign
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

TOKEN = f"{CANARY}-feishu-token"
SIGNED = f"{CANARY}-signed-token"
GUARDED = "keyword-token-0001"
SECRET = f"{CANARY}-secret-abcdef"
ADAPTER = FeishuAdapter()
CJK = "数据库磁盘已满，请立即处理。"


@pytest.fixture
def emulator() -> Iterator[FeishuEmulator]:
    bots = {TOKEN: Bot(), SIGNED: Bot(secret=SECRET), GUARDED: Bot(keywords=("告警", "alert"))}
    with FeishuEmulator(bots) as emu:
        assert isinstance(emu, FeishuEmulator)
        yield emu


def feishu_channel(
    emu: FeishuEmulator, token: str = TOKEN, secret: str | None = None, **fields: object
) -> tidings.Channel:
    config = {"webhook_url": emu.webhook_url(token)}
    if secret is not None:
        config["secret"] = secret
    return channel("feishu", config, **fields)


def is_reject(reason: Reason, *, disable: bool = False) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Reject) and (o.reason, o.disable_channel) == (reason, disable)


def is_retry(reason: Reason) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Retry) and o.reason is reason


def hint(seconds: float | None) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, RateLimited) and o.retry_after_s == seconds


def says(code: int, check: Callable[[Outcome], bool]) -> Callable[[Outcome], bool]:
    return lambda o: check(o) and str(getattr(o, "error", "")).startswith(f"code {code}: ")


# Written out independently of the module's table: a change to one must change the other.
EXPECTED = {
    11232: (RateLimited, hint(60.0)),
    19021: (Reject, is_reject(Reason.AUTH)),
    19022: (Reject, is_reject(Reason.AUTH)),
    19024: (Reject, is_reject(Reason.AUTH)),
    9499: (Reject, is_reject(Reason.CLIENT_ERROR)),
    19002: (Reject, is_reject(Reason.CLIENT_ERROR)),
    19036: (Reject, is_reject(Reason.TOO_LARGE)),
    19001: (Reject, is_reject(Reason.INVALID_TARGET)),  # UNCONFIRMED meaning: never disables
}


def test_the_code_table_is_covered() -> None:
    assert set(CODES) == set(EXPECTED)


def test_declared_limits() -> None:
    """The body as sent is what the robot measures (20,000 bytes)."""
    spec = FeishuAdapter.spec
    assert spec.limit == SizeLimit(20_000, SizeUnit.BODY_BYTES)
    assert spec.flavour == Flavour.FEISHU_MARKDOWN
    assert spec.default_rate_per_min == DEFAULT_RATE_PER_MIN < 100


async def test_every_documented_code(emulator: FeishuEmulator) -> None:
    ch = feishu_channel(emulator)
    cases = [Case("ok", lambda: None, Delivered)]
    for code, (expected, check) in EXPECTED.items():
        arrange = functools.partial(emulator.fail_next, code)
        cases.append(Case(f"code {code}", arrange, expected, says(code, check)))
    scripted = {
        # 9499 with a 4xx status (Apprise's reading, UNCONFIRMED): still read by its code.
        "9499 with HTTP 400": (9499, "Bad Request", 400, Reject, is_reject(Reason.CLIENT_ERROR)),
        # 9499 read as a call-rate limit by one integration (UNCONFIRMED): only if it says so.
        "9499 saying rate": (9499, "API call exceeds the limit", 200, RateLimited, hint(None)),
        "unknown code": (2200, "internal error", 200, Retry, is_retry(Reason.VENDOR_ERROR)),
    }
    for name, (code, msg, status, expected, check) in scripted.items():
        arrange = functools.partial(emulator.fail_next, code, msg, status=status)
        cases.append(Case(name, arrange, expected, check))
    raw = {
        "HTTP 502": (502, "bad gateway", Retry, is_retry(Reason.SERVER_ERROR)),
        "HTTP 400, not JSON": (400, "bad", Reject, is_reject(Reason.CLIENT_ERROR)),
        "HTTP 200, not JSON": (200, "<html>ok</html>", Retry, is_retry(Reason.UNEXPECTED)),
        "HTTP 200, no code": (200, '{"msg": "success"}', Retry, is_retry(Reason.UNEXPECTED)),
        "legacy StatusCode only": (200, '{"StatusCode": 0}', Delivered, lambda o: True),
    }
    for name, (status, text, expected, check) in raw.items():
        arrange = functools.partial(emulator.answer_next, status, text)
        cases.append(Case(name, arrange, expected, check))
    await run_table(ADAPTER, ch, cases)


async def test_payload_is_an_accepted_markdown_card(emulator: FeishuEmulator) -> None:
    ch = feishu_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title="磁盘告警 ~db1~", body=CJK)]
    )
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    (received,) = emulator.requests()
    assert received.body == message.payload
    assert message.size == len(message.payload)
    assert json.loads(received.body) == {
        "msg_type": "interactive",
        "card": {
            "schema": "2.0",
            "header": {"title": {"tag": "plain_text", "content": "磁盘告警 ~db1~"}},
            "body": {"elements": [{"tag": "markdown", "content": message.text}]},
        },
    }
    assert "磁盘告警 \\~db1\\~" in message.text  # escaped in markdown, plain in the header
    assert emulator.codes() == [0]


async def test_a_signed_bot_verifies_the_signature(emulator: FeishuEmulator) -> None:
    ch = feishu_channel(emulator, SIGNED, SECRET)
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1)])
    for _ in range(2):  # each attempt signs afresh
        assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    for received in emulator.requests():
        document = json.loads(received.body)
        stamp = document["timestamp"]
        assert isinstance(stamp, str)
        assert len(stamp) == 10  # seconds
        assert abs(int(stamp) - time.time()) < 60
        assert document["sign"] == expected_sign(SECRET, stamp)
        assert len(received.body) == message.size  # measured with the signature fields
    assert sign(SECRET, 1700000000) == expected_sign(SECRET, "1700000000")


async def test_signing_failures(emulator: FeishuEmulator) -> None:
    wrong = await send_one(ADAPTER, feishu_channel(emulator, SIGNED, "not-the-secret"))
    unsigned = await send_one(ADAPTER, feishu_channel(emulator, SIGNED))
    emulator.clock = lambda: time.time() + 7200  # the bot's clock two hours ahead of ours
    skewed = await send_one(ADAPTER, feishu_channel(emulator, SIGNED, SECRET))
    for outcome in (wrong, unsigned, skewed):
        assert isinstance(outcome, Reject)
        assert outcome.reason is Reason.AUTH
        assert outcome.error.startswith("code 19021: sign match fail")
    assert emulator.codes() == [19021] * 3


async def test_keywords_and_ip_whitelist(emulator: FeishuEmulator) -> None:
    ch = feishu_channel(emulator, GUARDED)
    plain = await send_one(ADAPTER, ch)
    assert isinstance(plain, Reject)
    assert (plain.reason, plain.error) == (Reason.AUTH, "code 19024: Key Words Not Found")
    tagged = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title="告警: db1 down")]
    )
    assert isinstance(await send_one(ADAPTER, ch, tagged), Delivered)
    emulator.bots[GUARDED] = Bot(ip_allowed=False)
    fenced = await send_one(ADAPTER, ch)
    assert isinstance(fenced, Reject)
    assert fenced.error == "code 19022: Ip Not Allowed"


async def test_unknown_token_is_rejected_without_disabling(emulator: FeishuEmulator) -> None:
    """The emulator's answer here (19001) is UNCONFIRMED: what is tested is that an answer we
    cannot be sure means "gone" rejects the message but leaves the channel enabled."""
    outcome = await send_one(ADAPTER, feishu_channel(emulator, token="deleted-bot-token"))
    assert isinstance(outcome, Reject)
    assert (outcome.reason, outcome.disable_channel) == (Reason.INVALID_TARGET, False)


@pytest.mark.parametrize("status", [200, 400])
async def test_over_long_body_is_what_the_bot_rejects(status: int) -> None:
    with FeishuEmulator({TOKEN: Bot()}, status_9499=status) as emulator:
        assert isinstance(emulator, FeishuEmulator)
        ch = feishu_channel(emulator)
        message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1, body=CJK * 600)])
        assert message.size > 20_000
        outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert (outcome.reason, outcome.error) == (Reason.CLIENT_ERROR, "code 9499: Bad Request")
    assert emulator.codes() == [9499]


async def test_a_long_event_is_shortened_and_accepted(emulator: FeishuEmulator) -> None:
    ch = feishu_channel(emulator, SIGNED, SECRET)
    body = (CJK + ' "quoted" \\ back\nslash ') * 900
    message = render_single(
        ADAPTER, ch, Target((1,), message_id="msg_t1"), event(1, title="T" * 500, body=body)
    )
    assert 19_900 < message.size <= 20_000
    assert message.text.endswith("…")
    assert len(message.title) == 128
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert len(emulator.requests()[0].body) == message.size


async def test_the_bots_rate_limit_is_a_rate_limit(emulator: FeishuEmulator) -> None:
    ch = feishu_channel(emulator)
    outcomes = [await send_one(ADAPTER, ch) for _ in range(6)]  # well within one second
    assert [type(o) for o in outcomes] == [Delivered] * 5 + [RateLimited]
    assert isinstance(outcomes[5], RateLimited)
    assert outcomes[5].retry_after_s == 60.0
    assert emulator.codes() == [0] * 5 + [11232]


def test_config_is_validated_and_redacted() -> None:
    url = f"https://open.feishu.cn/open-apis/bot/v2/hook/{TOKEN}"
    good = {"webhook_url": url, "secret": SECRET}
    assert ADAPTER.validate_config(good) == good
    assert ADAPTER.validate_config({"webhook_url": url}) == {"webhook_url": url}
    assert_redacted(ADAPTER, good)
    legacy = f"https://open.feishu.cn/open-apis/bot/hook/{CANARY}"
    for bad in ({}, {"webhook_url": "feishu://x"}, {"webhook_url": legacy}):
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config(bad)
        assert info.value.field == "config.webhook_url"
        assert CANARY not in str(info.value)
    for secret in (42, ""):
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config({"webhook_url": url, "secret": secret})
        assert info.value.field == "config.secret"
