"""The `wecom` kind's deltas against its emulator (the checks every kind passes are in
test_conformance.py): every documented errcode classified, HTTP 200 never taken for success
on its own, the 4096-byte markdown limit and the 20/min rate honoured, the key never leaking.
"""

from __future__ import annotations

import functools
import json
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
from tests.emulators.wecom import WecomEmulator
from tidings.channels.base import Target
from tidings.channels.wecom import CODES, DEFAULT_RATE_PER_MIN, WecomAdapter
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

KEY = f"{CANARY}-wecom-key"
ADAPTER = WecomAdapter()
CJK = "数据库磁盘已满，请立即处理。"


@pytest.fixture
def emulator() -> Iterator[WecomEmulator]:
    with WecomEmulator(keys=[KEY]) as emu:
        assert isinstance(emu, WecomEmulator)
        yield emu


def wecom_channel(emu: WecomEmulator, key: str = KEY, **fields: object) -> tidings.Channel:
    return channel("wecom", {"webhook_url": emu.webhook_url(key)}, **fields)


def is_reject(reason: Reason, *, disable: bool = False) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Reject) and (o.reason, o.disable_channel) == (reason, disable)


def is_retry(reason: Reason) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Retry) and o.reason is reason


def hint(seconds: float) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, RateLimited) and o.retry_after_s == seconds


def says(code: int, check: Callable[[Outcome], bool]) -> Callable[[Outcome], bool]:
    return lambda o: check(o) and str(getattr(o, "error", "")).startswith(f"errcode {code}: ")


# errcode -> (expected outcome type, check): written out here, independent of the module's
# table, so a change to the table must change a test too.
EXPECTED = {
    45009: (RateLimited, hint(60.0)),
    -1: (Retry, is_retry(Reason.SERVER_ERROR)),
    45033: (Retry, is_retry(Reason.RATE_LIMITED)),
    93000: (Reject, is_reject(Reason.GONE, disable=True)),
    93008: (Reject, is_reject(Reason.GONE, disable=True)),
    93004: (Reject, is_reject(Reason.INVALID_TARGET)),
    93017: (Reject, is_reject(Reason.CLIENT_ERROR)),
    40008: (Reject, is_reject(Reason.CLIENT_ERROR)),
    40058: (Reject, is_reject(Reason.CLIENT_ERROR)),
    44004: (Reject, is_reject(Reason.CLIENT_ERROR)),
    45002: (Reject, is_reject(Reason.TOO_LARGE)),
}


def test_the_code_table_is_covered() -> None:
    assert set(CODES) == set(EXPECTED)


def test_declared_limits() -> None:
    """4096 bytes of markdown content, the robot's documented unit; under 20 a minute."""
    spec = WecomAdapter.spec
    assert spec.limit == SizeLimit(4096, SizeUnit.TEXT_BYTES)
    assert spec.flavour == Flavour.WECOM_MARKDOWN
    assert spec.default_rate_per_min == DEFAULT_RATE_PER_MIN < 20


async def test_every_documented_errcode(emulator: WecomEmulator) -> None:
    ch = wecom_channel(emulator)
    cases = [Case("ok", lambda: None, Delivered)]
    for code, (expected, check) in EXPECTED.items():
        arrange = functools.partial(emulator.fail_next, code)
        cases.append(Case(f"errcode {code}", arrange, expected, says(code, check)))
    odd = {
        "HTTP 502": (502, "bad gateway", is_retry(Reason.SERVER_ERROR)),
        "HTTP 200, not JSON": (200, "<html>ok</html>", is_retry(Reason.UNEXPECTED)),
        "HTTP 200, no errcode": (200, '{"ok": 1}', is_retry(Reason.UNEXPECTED)),
        "HTTP 200, errcode a string": (200, '{"errcode": "0"}', is_retry(Reason.UNEXPECTED)),
    }
    for name, (status, raw, check) in odd.items():
        cases.append(Case(name, functools.partial(emulator.answer_next, status, raw), Retry, check))
    unknown = functools.partial(emulator.fail_next, 61234)
    cases.append(Case("unknown errcode", unknown, Retry, is_retry(Reason.VENDOR_ERROR)))
    await run_table(ADAPTER, ch, cases)
    assert emulator.codes()[0] == 0


async def test_errors_carry_the_vendors_words(emulator: WecomEmulator) -> None:
    emulator.fail_next(93004)
    outcome = await send_one(ADAPTER, wecom_channel(emulator))
    assert isinstance(outcome, Reject)
    assert outcome.error.startswith("errcode 93004: webhook disabled, hint: [")
    assert outcome.provider_response is not None
    assert json.loads(outcome.provider_response)["errcode"] == 93004


async def test_unknown_key_is_gone_and_disables_the_channel(emulator: WecomEmulator) -> None:
    outcome = await send_one(ADAPTER, wecom_channel(emulator, key="some-other-key-123"))
    assert isinstance(outcome, Reject)
    assert (outcome.reason, outcome.disable_channel) == (Reason.GONE, True)


async def test_payload_is_accepted_markdown(emulator: WecomEmulator) -> None:
    ch = wecom_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title="磁盘告警 *db1*", body=CJK)]
    )
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Delivered)
    (received,) = emulator.requests()
    assert received.headers["content-type"].startswith("application/json")
    document = json.loads(received.body)
    assert document == {"msgtype": "markdown", "markdown": {"content": message.text}}
    assert message.size == len(message.text.encode())
    assert "磁盘告警 \\*db1\\*" in emulator.contents()[0]


async def test_over_length_content_is_what_the_robot_rejects(emulator: WecomEmulator) -> None:
    """Without shortening, 40058 is what the limit protects against."""
    ch = wecom_channel(emulator)
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1, body=CJK * 200)])
    assert message.size > 4096
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert "exceed max length 4096" in outcome.error
    assert emulator.codes() == [40058]


async def test_a_long_event_is_shortened_and_accepted(emulator: WecomEmulator) -> None:
    ch = wecom_channel(emulator)
    big = event(1, title="磁盘 full", body=(CJK + "ascii text ") * 500)
    message = render_single(ADAPTER, ch, Target((1,), message_id="msg_t1"), big)
    assert 4000 < message.size <= 4096
    assert message.text.endswith("…")
    assert "磁盘 full" in message.text.splitlines()[0]  # the title survives the cut
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert emulator.codes() == [0]


async def test_the_robots_rate_limit_is_a_rate_limit(emulator: WecomEmulator) -> None:
    emulator.limit = 2
    ch = wecom_channel(emulator)
    outcomes = [await send_one(ADAPTER, ch) for _ in range(3)]
    assert [type(o) for o in outcomes] == [Delivered, Delivered, RateLimited]
    assert isinstance(outcomes[2], RateLimited)
    assert outcomes[2].retry_after_s == 60.0
    assert emulator.codes() == [0, 0, 45009]


def test_config_is_validated_and_redacted() -> None:
    good = {"webhook_url": f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={KEY}"}
    assert ADAPTER.validate_config(good) == good
    assert_redacted(ADAPTER, good)
    for bad in ({}, {"webhook_url": "ftp://x"}, {"webhook_url": f"https://h/send?k={CANARY}"}):
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config(bad)
        assert info.value.field == "config.webhook_url"
        assert CANARY not in str(info.value)
