"""The `slack` kind against its emulator: every documented answer classified (the error code
in the body decides over the status, and a 200 is success only when it says `ok`), the
3000-character section limit and the webhook's rate honoured, the token alone never leaking.
The checks every kind passes (timeouts, limits, secrets, end to end) are in
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
from tests.emulators.slack import SlackEmulator, validate
from tidings.channels.base import Target
from tidings.channels.slack import CODES, DEFAULT_RATE_PER_MIN, SlackAdapter
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Outcome, RateLimited, Reason, Reject, Retry
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

TOKEN = f"{CANARY}-slack-token"
ADAPTER = SlackAdapter()


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    # No rate limit by default: the tables send many messages back to back.
    with SlackEmulator(rate_per_s=None) as emu:
        assert isinstance(emu, SlackEmulator)
        yield emu


def slack_channel(emu: SlackEmulator, token: str = TOKEN, **fields: object) -> tidings.Channel:
    return channel("slack", {"webhook_url": emu.webhook_url(token)}, **fields)


def is_reject(reason: Reason, *, disable: bool = False) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Reject) and (o.reason, o.disable_channel) == (reason, disable)


def is_retry(reason: Reason) -> Callable[[Outcome], bool]:
    return lambda o: isinstance(o, Retry) and o.reason is reason


def says(text: str, check: Callable[[Outcome], bool]) -> Callable[[Outcome], bool]:
    return lambda o: check(o) and getattr(o, "error", "") == text


# error code -> (expected outcome type, check): written out here, independent of the module's
# table, so a change to the table must change a test too.
EXPECTED = {
    "invalid_payload": (Reject, is_reject(Reason.CLIENT_ERROR)),
    "invalid_blocks": (Reject, is_reject(Reason.CLIENT_ERROR)),
    "missing_text_or_fallback_or_attachments": (Reject, is_reject(Reason.CLIENT_ERROR)),
    "user_not_found": (Reject, is_reject(Reason.INVALID_TARGET)),
    "action_prohibited": (Reject, is_reject(Reason.AUTH)),
    "channel_not_found": (Reject, is_reject(Reason.INVALID_TARGET)),
    "no_service": (Reject, is_reject(Reason.GONE, disable=True)),
    "channel_is_archived": (Reject, is_reject(Reason.GONE, disable=True)),
    "rollup_error": (Retry, is_retry(Reason.SERVER_ERROR)),
    # Codes whose HTTP status is UNCONFIRMED: the emulator's status is only a guess, and the
    # adapter classifies by the code alone.
    "invalid_token": (Reject, is_reject(Reason.AUTH)),
    "no_team": (Reject, is_reject(Reason.INVALID_TARGET)),
    "team_disabled": (Reject, is_reject(Reason.AUTH)),
    "posting_to_general_channel_denied": (Reject, is_reject(Reason.AUTH)),
    "too_many_attachments": (Reject, is_reject(Reason.CLIENT_ERROR)),
}


def test_the_code_table_is_covered() -> None:
    assert set(CODES) == set(EXPECTED)


def test_declared_limits() -> None:
    spec = SlackAdapter.spec
    assert spec.limit == SizeLimit(3000, SizeUnit.TEXT_CHARS)
    assert spec.flavour == Flavour.SLACK_MRKDWN
    assert spec.default_rate_per_min == DEFAULT_RATE_PER_MIN < 60


async def test_every_documented_answer(emulator: SlackEmulator) -> None:
    ch = slack_channel(emulator)
    cases = [Case("ok", lambda: None, Delivered)]
    for code, (expected, check) in EXPECTED.items():
        status = emulator.statuses[code]
        arrange = functools.partial(emulator.fail_next, code)
        cases.append(Case(code, arrange, expected, says(f"HTTP {status}: {code}", check)))
        # The code decides even when it comes with HTTP 200: never taken for success.
        in_200 = functools.partial(emulator.fail_next, code, status=200)
        cases.append(Case(f"{code} in a 200", in_200, expected, says(f"HTTP 200: {code}", check)))
    odd = {
        "429 with Retry-After": (429, '{"ok":false}', {"Retry-After": "7"}, RateLimited),
        "502 page": (502, "<html>bad gateway</html>", {}, Retry),
        "503 with Retry-After": (503, "down", {"Retry-After": "3"}, Retry),
        "unknown 400": (400, "some_new_error", {}, Reject),
        "redirect": (302, "", {"Location": "http://elsewhere/x"}, Reject),
        "200, not ok": (200, "<html>captive portal</html>", {}, Retry),
        "200, empty": (200, "", {}, Retry),
        "200, JSON ok is not ok": (200, '{"ok": true}', {}, Retry),
    }
    for name, (status, raw, headers, expected_type) in odd.items():
        arrange = functools.partial(emulator.answer_next, status, raw, headers)
        cases.append(Case(name, arrange, expected_type))
    cases.append(
        Case("ok with whitespace", functools.partial(emulator.answer_next, 200, "ok\n"), Delivered)
    )
    await run_table(ADAPTER, ch, cases)
    assert emulator.answers[0] == (200, "ok")


async def test_hints_and_reasons_of_the_shared_statuses(emulator: SlackEmulator) -> None:
    ch = slack_channel(emulator)
    emulator.answer_next(429, '{"ok":false,"error":"rate_limited"}', {"Retry-After": "7"})
    limited = await send_one(ADAPTER, ch)
    assert isinstance(limited, RateLimited)
    assert limited.retry_after_s == 7.0
    emulator.answer_next(503, "down", {"Retry-After": "3"})
    busy = await send_one(ADAPTER, ch)
    assert isinstance(busy, Retry)
    assert (busy.reason, busy.retry_after_s) == (Reason.SERVER_ERROR, 3.0)
    emulator.answer_next(200, "<html>captive portal</html>")
    odd = await send_one(ADAPTER, ch)
    assert isinstance(odd, Retry)
    assert odd.reason is Reason.UNEXPECTED
    assert "without 'ok'" in odd.error


async def test_a_removed_or_archived_webhook_disables_the_channel(
    emulator: SlackEmulator,
) -> None:
    ch = slack_channel(emulator)
    url = ch.config["webhook_url"]
    emulator.set_state(url, "channel_is_archived")
    archived = await send_one(ADAPTER, ch)
    emulator.revoke(url)
    removed = await send_one(ADAPTER, ch)
    assert archived == Reject(
        Reason.GONE, "HTTP 410: channel_is_archived", "channel_is_archived", disable_channel=True
    )
    assert isinstance(removed, Reject)
    assert (removed.reason, removed.disable_channel) == (Reason.GONE, True)
    assert removed.error.endswith(": no_service")
    assert emulator.posted == []


async def test_payload_is_one_mrkdwn_section_with_a_fallback(emulator: SlackEmulator) -> None:
    ch = slack_channel(emulator)
    message = ADAPTER.render(
        ch, Target((1,), message_id="msg_t1"), [event(1, title="db1 <down> & *out*")]
    )
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    (received,) = emulator.requests()
    assert received.headers["content-type"].startswith("application/json")
    document = json.loads(received.body)
    assert document == {
        "text": "db1 &lt;down&gt; &amp; *out*",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": message.text}}],
    }
    assert validate(received.body) == (None, document)  # the emulator's own check
    assert message.size == len(message.text)
    assert emulator.texts()[0].startswith("*db1 &lt;down&gt; &amp; *out**")


async def test_over_length_section_is_what_slack_rejects(emulator: SlackEmulator) -> None:
    """Without shortening, `invalid_blocks` is what the limit protects against."""
    ch = slack_channel(emulator)
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [event(1, body="x" * 3200)])
    assert message.size > 3000
    outcome = await send_one(ADAPTER, ch, message)
    assert isinstance(outcome, Reject)
    assert outcome.error == "HTTP 400: invalid_blocks"


async def test_a_long_event_is_shortened_and_accepted(emulator: SlackEmulator) -> None:
    ch = slack_channel(emulator)
    big = event(1, title="disk <full>", body="línea & <tag> " * 800)
    message = render_single(ADAPTER, ch, Target((1,), message_id="msg_t1"), big)
    assert 2900 < message.size <= 3000
    assert message.text.endswith("…")
    assert "disk &lt;full&gt;" in message.text.splitlines()[0]  # the title survives the cut
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
    assert emulator.answers == [(200, "ok")]


async def test_the_webhooks_rate_limit_is_a_rate_limit() -> None:
    with SlackEmulator(rate_per_s=1.0, burst=2) as emu:
        assert isinstance(emu, SlackEmulator)
        ch = slack_channel(emu)
        outcomes = [await send_one(ADAPTER, ch) for _ in range(3)]
    assert [type(o) for o in outcomes] == [Delivered, Delivered, RateLimited]
    limited = outcomes[2]
    assert isinstance(limited, RateLimited)
    assert limited.retry_after_s == 1.0  # the emulator's integer Retry-After
    assert [status for status, _ in emu.answers] == [200, 200, 429]


async def test_the_token_never_leaks(emulator: SlackEmulator) -> None:
    ch = slack_channel(emulator)
    emulator.echo_next(500)  # an answer quoting the whole URL
    echoed = await send_one(ADAPTER, ch)
    emulator.answer_next(400, f"token {TOKEN} is not valid")  # quoting the token alone
    quoted = await send_one(ADAPTER, ch)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    gone = channel("slack", {"webhook_url": f"http://127.0.0.1:{closed}/services/T1/B1/{TOKEN}"})
    refused = await send_one(ADAPTER, gone)
    assert isinstance(echoed, Retry)
    assert isinstance(quoted, Reject)
    assert isinstance(refused, Retry)
    for outcome, sent_to in ((echoed, ch), (quoted, ch), (refused, gone)):
        assert_no_secret(outcome, sent_to, ADAPTER)
        assert CANARY not in str(outcome)
    assert "••••" in echoed.error


def test_config_is_validated_and_redacted() -> None:
    good = {"webhook_url": f"https://hooks.slack.com/services/T0001/B0001/{TOKEN}"}
    assert ADAPTER.validate_config(good) == good
    assert_redacted(ADAPTER, good)
    bad_urls: tuple[dict[str, str], ...] = (
        {},
        {"webhook_url": "ftp://x"},
        {"webhook_url": "https://hooks.slack.com/"},
    )
    for bad in bad_urls:
        with pytest.raises(ValidationError) as info:
            ADAPTER.validate_config(bad)
        assert info.value.field == "config.webhook_url"
    with pytest.raises(ValidationError) as extra:
        ADAPTER.validate_config(good | {"channel": CANARY})
    assert extra.value.field == "config.channel"
    assert CANARY not in str(extra.value)
