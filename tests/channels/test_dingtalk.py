"""The `dingtalk` kind against its emulator: every documented errcode classified, HTTP 200 never
taken for success on its own, signing verified by the robot, the 20,000-byte body limit and
the rate limit honoured. The checks every kind passes are in test_conformance.py.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

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
from tests.emulators.dingtalk import DingtalkEmulator, Robot, expected_sign
from tidings.channels.base import Message, Target
from tidings.channels.dingtalk import CODES, DEFAULT_RATE_PER_MIN, DingtalkAdapter, sign
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

TOKEN = f"{CANARY}-dingtalk-token"
SIGNED = f"{CANARY}-signed-token"
GUARDED = "keyword-token-0001"
SECRET = f"SEC{CANARY}0123456789abcdef"
ADAPTER = DingtalkAdapter()
CJK = "数据库磁盘已满，请立即处理。"


@pytest.fixture
def emulator() -> Iterator[DingtalkEmulator]:
    robots = {
        TOKEN: Robot(),
        SIGNED: Robot(secret=SECRET),
        GUARDED: Robot(keywords=("告警", "alert")),
    }
    with DingtalkEmulator(robots) as emu:
        assert isinstance(emu, DingtalkEmulator)
        yield emu


def dingtalk_channel(
    emu: DingtalkEmulator, token: str = TOKEN, secret: str | None = None, **fields: object
) -> tidings.Channel:
    config = {"webhook_url": emu.webhook_url(token)}
    if secret is not None:
        config["secret"] = secret
    return channel("dingtalk", config, **fields)


def is_reject(reason: Reason, *, disable: bool = False) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Reject) and (o.reason, o.disable_channel) == (reason, disable)


def is_retry(reason: Reason) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Retry) and o.reason is reason


def hint(seconds: float) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, RateLimited) and o.retry_after_s == seconds


def says(code: int, check: Callable[[Outcome], bool]) -> Callable[[Outcome], bool]:
    return lambda o: check(o) and str(getattr(o, "error", "")).startswith(f"errcode {code}: ")


# Written out independently of the module's table: a change to one must change the other.
EXPECTED = {
    130101: (RateLimited, hint(600.0)),
    -1: (Retry, is_retry(Reason.SERVER_ERROR)),
    310000: (Reject, is_reject(Reason.AUTH)),
    300001: (Reject, is_reject(Reason.GONE, disable=True)),
    300005: (Reject, is_reject(Reason.GONE, disable=True)),
    460101: (Reject, is_reject(Reason.TOO_LARGE)),
    101002: (Reject, is_reject(Reason.TOO_LARGE)),
    400402: (Reject, is_reject(Reason.CLIENT_ERROR)),
}


def test_the_code_table_is_covered() -> None:
    assert set(CODES) == set(EXPECTED)


def test_declared_limits() -> None:
    """The body as sent is what the robot measures (20,000 bytes)."""
    spec = DingtalkAdapter.spec
    assert spec.limit == SizeLimit(20_000, SizeUnit.BODY_BYTES)
    assert spec.flavour == Flavour.DINGTALK_MARKDOWN
    assert spec.default_rate_per_min == DEFAULT_RATE_PER_MIN < 20


async def test_every_documented_errcode(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator)
    cases = [Case("ok", lambda: None, Delivered)]
    for code, (expected, check) in EXPECTED.items():
        arrange = functools.partial(emulator.fail_next, code)
        cases.append(Case(f"errcode {code}", arrange, expected, says(code, check)))
    unknown = functools.partial(emulator.fail_next, 410100)  # UNCONFIRMED code: not trusted
    cases.append(Case("unknown errcode", unknown, Retry, is_retry(Reason.VENDOR_ERROR)))
    odd = {
        "HTTP 503": (503, "unavailable", is_retry(Reason.SERVER_ERROR)),
        "HTTP 200, not JSON": (200, "<html>ok</html>", is_retry(Reason.UNEXPECTED)),
        "HTTP 200, no errcode": (200, '{"errmsg": "ok"}', is_retry(Reason.UNEXPECTED)),
    }
    for name, (status, raw, check) in odd.items():
        cases.append(Case(name, functools.partial(emulator.answer_next, status, raw), Retry, check))
    await run_table(ADAPTER, ch, cases)
    # A signed request whose timestamp the robot found expired: signed afresh on a retry.
    expired = functools.partial(emulator.fail_next, 310000, "invalid timestamp")
    expired_cn = functools.partial(emulator.fail_next, 310000, "description:机器人发送签名过期")
    signed_cases = [
        Case("310000 expired signature", expired, Retry, is_retry(Reason.AUTH)),
        Case("310000 签名过期", expired_cn, Retry, is_retry(Reason.AUTH)),
        Case(
            "310000 sign not match",
            functools.partial(emulator.fail_next, 310000, "sign not match"),
            Reject,
            is_reject(Reason.AUTH),
        ),
    ]
    await run_table(ADAPTER, dingtalk_channel(emulator, SIGNED, SECRET), signed_cases)


async def test_unknown_token_disables_the_channel(emulator: DingtalkEmulator) -> None:
    outcome = await send_one(ADAPTER, dingtalk_channel(emulator, token="deleted-robot-token"))
    assert isinstance(outcome, Reject)
    assert (outcome.reason, outcome.disable_channel) == (Reason.GONE, True)
    assert outcome.error == "errcode 300001: token is not exist"


async def test_payload_is_accepted_markdown(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title="磁盘告警 db1", body=CJK)]
    )
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    (received,) = emulator.requests()
    assert received.body == message.payload
    assert message.size == len(message.payload)
    document = json.loads(received.body)
    assert document == {
        "msgtype": "markdown",
        "markdown": {"title": "磁盘告警 db1", "text": message.text},
    }
    assert set(received.query) == {"access_token"}  # no secret: nothing signed


async def test_a_signed_robot_verifies_the_signature(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator, SIGNED, SECRET)
    for _ in range(2):  # each attempt signs afresh
        assert isinstance(await send_one(ADAPTER, ch), Delivered)
    for received in emulator.requests():
        stamp = received.query["timestamp"]
        assert len(stamp) == 13  # milliseconds
        assert abs(int(stamp) / 1000 - time.time()) < 60
        assert received.query["sign"] == expected_sign(SECRET, stamp)
    assert sign(SECRET, 1700000000000) == expected_sign(SECRET, "1700000000000")


def test_the_signature_is_url_encoded_in_the_query() -> None:
    """Base64 has `+`, `/` and `=`; unencoded, a `+` would reach the robot as a space."""
    ch = channel(
        "dingtalk", {"webhook_url": "https://h/robot/send?access_token=t", "secret": SECRET}
    )
    start = 1_700_000_000_000
    stamp = next(ms for ms in range(start, start + 1000) if "+" in sign(SECRET, ms))
    url = ADAPTER.url(ch, datetime.fromtimestamp((stamp + 0.5) / 1000, UTC))
    query = parse_qs(urlsplit(url).query, strict_parsing=True)
    assert query["access_token"] == ["t"]
    assert query["timestamp"] == [str(stamp)]
    assert query["sign"] == [expected_sign(SECRET, str(stamp))]
    assert "%2B" in url


async def test_signing_failures(emulator: DingtalkEmulator) -> None:
    wrong = await send_one(ADAPTER, dingtalk_channel(emulator, SIGNED, "SECnot-the-secret"))
    assert isinstance(wrong, Reject)
    assert wrong.error == "errcode 310000: sign not match"
    # Whatever the robot says about an unsigned request (its wording is UNCONFIRMED), a
    # channel without a secret cannot fix it by retrying.
    unsigned = await send_one(ADAPTER, dingtalk_channel(emulator, SIGNED))
    assert isinstance(unsigned, Reject)
    assert "set config.secret" in unsigned.error
    emulator.clock = lambda: time.time() + 7200  # the robot's clock two hours ahead of ours
    skewed = await send_one(ADAPTER, dingtalk_channel(emulator, SIGNED, SECRET))
    assert isinstance(skewed, Retry)
    assert skewed.reason is Reason.AUTH
    assert skewed.error.startswith("errcode 310000: invalid timestamp")
    assert "clock" in skewed.error
    assert emulator.codes() == [310000] * 3


async def test_keywords_and_ip_whitelist(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator, GUARDED)
    plain = await send_one(
        ADAPTER, ch, ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1)])
    )
    assert isinstance(plain, Reject)
    assert (plain.reason, plain.error) == (Reason.AUTH, "errcode 310000: keywords not in content")
    tagged = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title="告警: db1 down")]
    )
    assert isinstance(await send_one(ADAPTER, ch, tagged), Delivered)
    emulator.robots[GUARDED] = Robot(ip_allowed=False)
    fenced = await send_one(ADAPTER, ch)
    assert isinstance(fenced, Reject)
    assert fenced.reason is Reason.AUTH


async def test_missing_title_is_a_client_error(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator)
    payload = json.dumps({"msgtype": "markdown", "markdown": {"text": "x"}}).encode()
    outcome = await send_one(
        ADAPTER, ch, Message(Target((1,), message_id="msg_t1"), payload, len(payload))
    )
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.CLIENT_ERROR
    assert "title 缺失" in outcome.error


async def test_over_long_body_is_what_the_robot_rejects(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator)
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1, body=CJK * 600)])
    assert message.size > 20_000
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert (outcome.reason, emulator.codes()) == (Reason.TOO_LARGE, [460101])


async def test_a_long_event_is_shortened_and_accepted(emulator: DingtalkEmulator) -> None:
    ch = dingtalk_channel(emulator, SIGNED, SECRET)
    # Quotes, backslashes and newlines grow when JSON-escaped: the body is what is measured.
    body = (CJK + ' "quoted" \\ back\nslash ') * 900
    message = render_single(
        ADAPTER, ch, Target((1,), message_id="msg_t1"), event(1, title="T" * 500, body=body)
    )
    assert 19_900 < message.size <= 20_000
    assert message.text.endswith("…")
    assert len(message.title) == 128
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert len(emulator.requests()[0].body) == message.size


async def test_the_robots_rate_limit_blocks_it(emulator: DingtalkEmulator) -> None:
    emulator.limit = 2
    emulator.wait_fields = True  # the UNCONFIRMED `wait` field must not shorten the hint
    ch = dingtalk_channel(emulator)
    outcomes = [await send_one(ADAPTER, ch) for _ in range(4)]
    assert [type(o) for o in outcomes] == [Delivered, Delivered, RateLimited, RateLimited]
    assert all(o.retry_after_s == 600.0 for o in outcomes[2:] if isinstance(o, RateLimited))
    assert emulator.codes() == [0, 0, 130101, 130101]


def test_config_is_validated_and_redacted() -> None:
    url = f"https://oapi.dingtalk.com/robot/send?access_token={TOKEN}"
    good = {"webhook_url": url, "secret": SECRET}
    assert ADAPTER.validate_config(good) == good
    assert ADAPTER.validate_config({"webhook_url": url}) == {"webhook_url": url}
    assert_redacted(ADAPTER, good)
    bad_urls = [{}, {"webhook_url": f"https://oapi.dingtalk.com/robot/send?token={CANARY}"}]
    for bad in bad_urls:
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config(bad)
        assert info.value.field == "config.webhook_url"
        assert CANARY not in str(info.value)
    for secret in (42, "  "):
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config({"webhook_url": url, "secret": secret})
        assert info.value.field == "config.secret"
