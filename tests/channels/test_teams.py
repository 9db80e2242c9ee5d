"""The `teams` kind against its emulator: Workflows' 202 taken as accepted (and what that
cannot tell), every status classified, the retired connector's 200-with-error-text never
taken for success, the ~28 KB message limit measured on the whole body, the `sig` never
leaking, and "accepted" recorded end to end. The checks every kind passes are in
test_conformance.py.
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
from tests.dispatch.helpers import running, settled
from tests.emulators.teams import CONNECTOR_FAILURE, TeamsEmulator, _card
from tidings.channels.base import Target
from tidings.channels.teams import ACCEPTED, DEFAULT_RATE_PER_MIN, STATUSES, TeamsAdapter
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.core.states import State
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

SIG = f"{CANARY}-teams-sig"
ADAPTER = TeamsAdapter()
CJK = "数据库磁盘已满，请立即处理。"
#: The connector's success answer as observed since 2023 (MicrosoftDocs/msteams-docs#7852).
ECHO = '{"version":"1.1","statusCode":200,"reasonPhrase":"OK","isSuccessStatusCode":true}'


@pytest.fixture
def emulator() -> Iterator[TeamsEmulator]:
    # No rate limit by default: the tables send many messages back to back.
    with TeamsEmulator(rate_per_s=None) as emu:
        assert isinstance(emu, TeamsEmulator)
        yield emu


def teams_channel(emu: TeamsEmulator, sig: str = SIG, **fields: object) -> tidings.Channel:
    return channel("teams", {"webhook_url": emu.flow_url(sig)}, **fields)


def is_reject(reason: Reason, *, disable: bool = False) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Reject) and (o.reason, o.disable_channel) == (reason, disable)


def is_retry(reason: Reason, hint: float | None = None) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Retry) and (o.reason, o.retry_after_s) == (reason, hint)


def is_limited(hint: float | None) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, RateLimited) and o.retry_after_s == hint


def says(text: str, check: Callable[[Outcome], bool]) -> Callable[[Outcome], bool]:
    return lambda o: check(o) and getattr(o, "error", "") == text


# HTTP status -> (expected outcome type, check): written out here, independent of the
# module's table, so a change to the table must change a test too.
EXPECTED = {
    400: (Reject, is_reject(Reason.CLIENT_ERROR)),
    401: (Reject, is_reject(Reason.AUTH)),
    403: (Reject, is_reject(Reason.AUTH)),
    404: (Reject, is_reject(Reason.INVALID_TARGET)),
    413: (Reject, is_reject(Reason.TOO_LARGE)),
    429: (RateLimited, is_limited(None)),
}


def test_the_status_table_is_covered() -> None:
    assert set(STATUSES) == set(EXPECTED)


def test_declared_limits() -> None:
    spec = TeamsAdapter.spec
    assert spec.limit == SizeLimit(27000, SizeUnit.BODY_BYTES)
    assert spec.flavour == Flavour.TEAMS_MARKDOWN
    assert spec.default_rate_per_min == DEFAULT_RATE_PER_MIN < 4 * 60


async def test_every_status(emulator: TeamsEmulator) -> None:
    ch = teams_channel(emulator)
    error = '{"error":{"code":"SomeCode","message":"what went wrong"}}'
    cases = [Case("202 accepted", lambda: None, Delivered, lambda o: o == Delivered(ACCEPTED))]
    for status, (expected, check) in EXPECTED.items():
        arrange = functools.partial(emulator.answer_next, status, error)
        says_it = says(f"HTTP {status}: SomeCode: what went wrong", check)
        cases.append(Case(str(status), arrange, expected, says_it))
    more = {
        "429 with Retry-After": (429, {"Retry-After": "5"}, RateLimited, is_limited(5.0)),
        "500": (500, {}, Retry, is_retry(Reason.SERVER_ERROR)),
        "502 with Retry-After": (
            502,
            {"Retry-After": "4"},
            Retry,
            is_retry(Reason.SERVER_ERROR, 4.0),
        ),
        "409": (409, {}, Reject, is_reject(Reason.CLIENT_ERROR)),
        "redirect": (302, {"Location": "http://elsewhere/"}, Reject, is_reject(Reason.REDIRECT)),
    }
    for name, (status, headers, expected_type, check) in more.items():
        arrange = functools.partial(emulator.answer_next, status, "", headers)
        cases.append(Case(name, arrange, expected_type, check))
    await run_table(ADAPTER, ch, cases)


async def test_connector_answers_in_a_200(emulator: TeamsEmulator) -> None:
    """The retired connector: 200 is a success only with a message count in the body."""
    ch = teams_channel(emulator)
    wrapped = {
        429: (RateLimited, is_limited(None)),
        413: (Reject, is_reject(Reason.TOO_LARGE)),
        400: (Reject, is_reject(Reason.CLIENT_ERROR)),
        500: (Retry, is_retry(Reason.SERVER_ERROR)),
    }
    cases = []
    for status, (expected, check) in wrapped.items():
        text = CONNECTOR_FAILURE.format(status=status)
        arrange = functools.partial(emulator.answer_next, 200, text)
        cases.append(
            Case(f"200 wrapping {status}", arrange, expected, says(f"HTTP 200: {text}", check))
        )
    other = "System.Net.Http.HttpRequestException: Error while copying content to a stream."
    answers = {
        "200 other text": (other, Retry, is_retry(Reason.VENDOR_ERROR)),
        "200 1": ("1", Delivered, lambda o: o == Delivered("1")),
        "200 empty": ("", Delivered, lambda o: o == Delivered("accepted (HTTP 200, empty body)")),
        "200 JSON success echo": (ECHO, Delivered, lambda o: o == Delivered(ECHO)),
        "200 JSON failure echo": (
            ECHO.replace("true", "false"),
            Retry,
            is_retry(Reason.VENDOR_ERROR),
        ),
    }
    for name, (raw, expected_type, check) in answers.items():
        arrange = functools.partial(emulator.answer_next, 200, raw)
        cases.append(Case(name, arrange, expected_type, check))
    await run_table(ADAPTER, ch, cases)


async def test_the_legacy_connector_end_to_end(emulator: TeamsEmulator) -> None:
    ch = channel("teams", {"webhook_url": emulator.connector_url(f"{CANARY}-connector")})
    assert await send_one(ADAPTER, ch) == Delivered("1")
    emulator.connector_fail_next(429)
    throttled = await send_one(ADAPTER, ch)
    assert isinstance(throttled, RateLimited)
    assert throttled.error.startswith("HTTP 200: Webhook message delivery failed with error:")
    assert "HTTP error 429" in throttled.error
    assert_no_secret(throttled, ch, ADAPTER)
    assert len(emulator.texts()) == 1


async def test_workflows_refusals(emulator: TeamsEmulator) -> None:
    wrong_sig = channel("teams", {"webhook_url": emulator.flow_url(SIG).replace(SIG, "x" * 24)})
    bad = await send_one(ADAPTER, wrong_sig)
    assert isinstance(bad, Reject)
    assert bad.reason is Reason.AUTH
    assert "DirectApiAuthorizationRequired" in bad.error
    ch = teams_channel(emulator)
    emulator.delete_flow()
    gone = await send_one(ADAPTER, ch)
    assert isinstance(gone, Reject)
    assert (gone.reason, gone.disable_channel) == (Reason.INVALID_TARGET, False)
    assert emulator.runs == []


async def test_a_bad_sig_is_permanent_whichever_status_it_gets() -> None:
    """The status for a bad `sig` is UNCONFIRMED (401 or 403): both are refused for good."""
    with TeamsEmulator(statuses={"bad_sig": 403}) as emu:
        assert isinstance(emu, TeamsEmulator)
        ch = channel("teams", {"webhook_url": emu.flow_url(SIG).replace(SIG, "y" * 24)})
        outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Reject)
    assert (outcome.reason, outcome.error[:8]) == (Reason.AUTH, "HTTP 403")


async def test_accepted_is_all_the_caller_learns(emulator: TeamsEmulator) -> None:
    """A run failing after the 202 is invisible: the outcome says accepted, not posted."""
    ch = teams_channel(emulator)
    emulator.fail_flow_next()
    outcome = await send_one(ADAPTER, ch)
    assert outcome == Delivered(ACCEPTED)
    assert "accepted" in ACCEPTED
    assert [r.status for r in emulator.runs] == ["Failed"]


async def test_payload_is_an_adaptive_card(emulator: TeamsEmulator) -> None:
    ch = teams_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title='db1 "down" *now*', body=CJK)]
    )
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    (received,) = emulator.requests()
    assert received.headers["content-type"].startswith("application/json")
    assert received.query["sig"] == SIG
    document = json.loads(received.body)
    assert document == {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": [{"type": "TextBlock", "text": message.text, "wrap": True}],
                },
            }
        ],
    }
    assert _card(received.body)[1] == ""  # the emulator's own check
    assert [r.status for r in emulator.runs] == ["Succeeded"]
    assert message.size == len(message.payload) == len(received.body)
    assert emulator.texts()[0].startswith('**db1 "down" \\*now\\***')


async def test_over_size_message_is_what_teams_refuses(emulator: TeamsEmulator) -> None:
    """Without shortening, 413 is what the limit protects against."""
    ch = teams_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, body='"quoted" ' * 3500)]
    )
    assert message.size > 28_000
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.TOO_LARGE
    assert emulator.runs == []


async def test_a_long_event_is_shortened_and_accepted(emulator: TeamsEmulator) -> None:
    """JSON escapes (quotes, backslashes, newlines) count: the whole body is what fits."""
    ch = teams_channel(emulator)
    big = event(1, title="disk full", body=('"q" \\ * _ ' + CJK + "\n") * 1500)
    message = render_single(ADAPTER, ch, Target((1,), message_id="msg_t1"), big)
    assert 26_900 < message.size <= 27_000
    assert message.size == len(message.payload)
    assert message.text.endswith("…")
    assert "disk full" in message.text.splitlines()[0]  # the title survives the cut
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert [r.status for r in emulator.runs] == ["Succeeded"]


async def test_the_throttle_is_a_rate_limit() -> None:
    """4 requests a second; whether Workflows sends Retry-After is UNCONFIRMED: both ways."""
    for retry_after, hint in ((None, None), ("2", 2.0)):
        with TeamsEmulator(rate_per_s=2, retry_after=retry_after) as emu:
            assert isinstance(emu, TeamsEmulator)
            ch = teams_channel(emu)
            outcomes = [await send_one(ADAPTER, ch) for _ in range(3)]
        assert [type(o) for o in outcomes] == [Delivered, Delivered, RateLimited]
        assert isinstance(outcomes[2], RateLimited)
        assert outcomes[2].retry_after_s == hint


async def test_the_sig_never_leaks(emulator: TeamsEmulator) -> None:
    ch = teams_channel(emulator)
    emulator.echo_next(500)  # an answer quoting the whole URL
    echoed = await send_one(ADAPTER, ch)
    emulator.answer_next(401, json.dumps({"error": {"code": "Bad", "message": f"sig {SIG}"}}))
    quoted = await send_one(ADAPTER, ch)  # quoting the sig alone
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    url = f"http://127.0.0.1:{closed}/workflows/1/triggers/manual/paths/invoke?sv=1.0&sig={SIG}"
    gone = channel("teams", {"webhook_url": url})
    refused = await send_one(ADAPTER, gone)
    assert isinstance(echoed, Retry)
    assert isinstance(quoted, Reject)
    assert isinstance(refused, Retry)
    for outcome, sent_to in ((echoed, ch), (quoted, ch), (refused, gone)):
        assert_no_secret(outcome, sent_to, ADAPTER)
        assert CANARY not in str(outcome)
    assert "••••" in quoted.error


def test_config_is_validated_and_redacted() -> None:
    url = (
        "https://prod-01.westeurope.logic.azure.com:443/workflows/abc/triggers/manual/paths/"
        f"invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SIG}"
    )
    good = {"webhook_url": url}
    assert ADAPTER.validate_config(good) == good
    assert_redacted(ADAPTER, good)
    for bad in ({}, {"webhook_url": "ftp://x"}, {"webhook_url": "https://host/"}):
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config(bad)
        assert info.value.field == "config.webhook_url"
    with pytest.raises(ValidationError) as extra:
        ADAPTER.validate_config(good | {"secret": CANARY})
    assert extra.value.field == "config.secret"
    assert CANARY not in str(extra.value)


async def test_end_to_end_through_a_dispatcher(hub: tidings.Hub, emulator: TeamsEmulator) -> None:
    await hub.channels.create(
        name="sec-teams",
        kind="teams",
        config={"webhook_url": emulator.flow_url(SIG)},
        timeout_s=2,
        retry_backoff_s=0.05,
    )
    async with running(hub):  # teams is a built-in kind
        await hub.publish(kind="finding.created", subject="finding:1", title="SQL *injection*")
        (row,) = await settled(hub, 1)
    assert (row.state, row.attempts) == (State.SENT, 1)
    (text,) = emulator.texts()
    assert "SQL \\*injection\\*" in text
    log = (await hub.delivery(row.id)).attempts_log
    assert log[-1].provider_response == ACCEPTED
