"""The `apprise` kind, offline: Apprise's json:// service posting to a local sink on loopback.

The mapping is as honest as Apprise lets it be: accepted → delivered, some services failed →
partial, any failure → retry (Apprise cannot say whether retrying helps), never a rate limit.
The checks every kind passes are in test_conformance.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.channels.harness import (
    CANARY,
    Case,
    assert_no_secret,
    assert_within_limit,
    channel,
    event,
    run_table,
    send_one,
)
from tests.sink import Answer, Sink
from tidings.channels import apprise as apprise_kind
from tidings.channels.apprise import AppriseAdapter, outcome_for_result
from tidings.channels.base import Target
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Partial, Reason, Reject, Retry

ADAPTER = AppriseAdapter()
PATH = f"/notify/{CANARY}"


@pytest.fixture
def installed() -> None:
    pytest.importorskip("apprise")


def json_url(sink: Sink, path: str = PATH) -> str:
    return f"json://127.0.0.1:{sink.port}{path}"


def apprise_channel(*urls: str, **fields: Any) -> Channel:
    return channel("apprise", ADAPTER.validate_config({"urls": list(urls)}), **fields)


# --- answers --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("installed")
async def test_answer_table(sink: Sink) -> None:
    def answer(*answers: Answer) -> Any:
        return lambda: sink.script(PATH, *answers)

    cases = [
        Case("200", answer(Answer(200)), Delivered),
        Case("204", answer(Answer(204, "")), Delivered),
        Case(
            "500: Apprise cannot say more than failed",
            answer(Answer(500, "boom")),
            Retry,
            lambda o: o.reason is Reason.UNEXPECTED and "cannot say" in o.error,
        ),
        Case(
            "400 is not known to be permanent through Apprise",
            answer(Answer(400, "bad")),
            Retry,
        ),
        Case("429 is no rate limit through Apprise", answer(Answer(429, "slow")), Retry),
        Case(
            "connection dropped",
            answer(Answer(close=True)),
            Retry,
        ),
    ]
    await run_table(ADAPTER, apprise_channel(json_url(sink)), cases)
    assert sink.count(PATH) == len(cases)


@pytest.mark.usefixtures("installed")
async def test_payload_reaches_the_service(sink: Sink) -> None:
    ch = apprise_channel(json_url(sink))
    outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Delivered)
    (request,) = sink.requests(PATH)
    body = request.json()
    assert body["title"] == "SQL injection in /login #1"
    assert body["message"].startswith("SQL injection in /login #1\n")
    assert body["type"] == "info"


@pytest.mark.usefixtures("installed")
async def test_one_of_two_services_failing_is_partial(sink: Sink) -> None:
    sink.script("/bad", Answer(500, "down"))
    ch = apprise_channel(json_url(sink), json_url(sink, "/bad"))
    outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Partial)
    assert "FAILURE" in outcome.error
    assert (sink.count(PATH), sink.count("/bad")) == (1, 1)


class _Status:
    def __init__(self, name: str) -> None:
        self.name = name


class _Result(list[Any]):
    def __init__(self, status: str) -> None:
        super().__init__()
        self.status = _Status(status)


@pytest.mark.parametrize(
    ("status", "expected", "reason"),
    [
        ("SUCCESS", Delivered, None),
        ("PARTIAL", Partial, None),
        ("TIMEOUT", Retry, Reason.TIMEOUT),
        ("FAILURE", Retry, Reason.UNEXPECTED),
        ("NOMATCH", Reject, Reason.CLIENT_ERROR),
    ],
)
def test_each_apprise_status(status: str, expected: type, reason: Reason | None) -> None:
    outcome = outcome_for_result(_Result(status))
    assert isinstance(outcome, expected)
    assert getattr(outcome, "reason", None) is reason


def test_bool_answers_of_older_apprise() -> None:
    assert isinstance(outcome_for_result(True), Delivered)
    failed = outcome_for_result(False)
    assert isinstance(failed, Retry)
    assert failed.reason is Reason.UNEXPECTED
    assert "gives no detail" in failed.error


# --- secrets and outbound safety -----------------------------------------------------------------


@pytest.mark.usefixtures("installed")
async def test_user_chosen_host_is_checked(sink: Sink) -> None:
    ch = apprise_channel(json_url(sink))
    outcome = await send_one(ADAPTER, ch, allowed=())
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.BLOCKED_ADDRESS
    assert sink.count() == 0
    private = apprise_channel(f"json://10.1.2.3/{CANARY}")
    outcome = await send_one(ADAPTER, private, allowed=())
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.BLOCKED_ADDRESS
    assert_no_secret(outcome, private, ADAPTER)


# --- configuration and limits ---------------------------------------------------------------------


@pytest.mark.usefixtures("installed")
def test_config_is_validated_without_echoing_urls() -> None:
    checked = ADAPTER.validate_config({"urls": ["json://a.example/x", "json://b.example/y"]})
    assert checked["urls"] == "json://a.example/x json://b.example/y"
    assert ADAPTER.validate_config({"urls": "json://a.example/x, json://b.example/y"}) == checked
    for config in ({}, {"urls": []}, {"urls": 5}, {"urls": [f"nope://{CANARY}"]}):
        with pytest.raises(ValidationError) as caught:
            ADAPTER.validate_config(config)
        assert caught.value.field == "config.urls"
        assert CANARY not in str(caught.value)


@pytest.mark.usefixtures("installed")
def test_limit_follows_the_strictest_service() -> None:
    assert ADAPTER.size_limit(apprise_channel("json://a.example/x")) == 32_768
    telegram = apprise_channel("json://a.example/x", f"tgram://123456:{CANARY}/12345")
    assert ADAPTER.size_limit(telegram) == 4096  # and Telegram takes the title in its body
    events = [event(i, title=f"host {i} down " + "x" * 200) for i in range(1, 60)]
    messages = assert_within_limit(ADAPTER, telegram, events)
    assert len(messages) > 1
    long_title = event(title="T" * 5000, body="b" * 10_000)
    single = ADAPTER.render(
        telegram, Target((1,), message_id="msg_t1"), [long_title], shorten_to=4096
    )
    assert single.size <= 4096
    assert len(single.title) <= 250


def test_declared_limits() -> None:
    """Characters of body, at most 32,768; the configured services may lower it."""
    spec = ADAPTER.spec
    assert spec.limit == SizeLimit(32_768, SizeUnit.TEXT_CHARS)
    assert spec.flavour == "text"
    assert spec.default_rate_per_min > 0


async def test_without_apprise_the_kind_refuses_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(apprise_kind, "load_apprise", lambda: None)
    with pytest.raises(ValidationError, match=r"pip install tidings\[apprise\]"):
        ADAPTER.validate_config({"urls": ["json://a.example/x"]})
    ch = channel("apprise", {"urls": "json://a.example/x"})
    outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Reject)
    assert "pip install tidings[apprise]" in outcome.error


# --- end to end -----------------------------------------------------------------------------------
