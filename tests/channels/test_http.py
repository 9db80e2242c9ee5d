"""The shared HTTP seam: status classification as a table, exceptions translated into
outcomes, URLs redacted in every message, and a real aiohttp server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tidings.channels.failure import outcome_for_exception
from tidings.channels.http import (
    MAX_ERROR_CHARS,
    MAX_RESPONSE_BYTES,
    STATUS_RULES,
    HttpClient,
    HttpResponse,
    InvalidTarget,
    RequestTimeout,
    classify,
    redact_url,
    scrub,
)
from tidings.channels.netguard import BlockedAddress, parse_networks
from tidings.channels.verdict import Verdict
from tidings.core.outcome import (
    Delivered,
    Outcome,
    RateLimited,
    Reason,
    Reject,
    Retry,
    attempt_status,
)
from tidings.core.states import AttemptStatus

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
CANARY = "SECRET-CANARY-123"
LOOPBACK = parse_networks("127.0.0.0/8")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def answer(status: int, text: str = "", **headers: str) -> HttpResponse:
    return HttpResponse(status=status, headers=headers, text=text)


def assert_no_canary(outcome: Outcome) -> None:
    for field in ("error", "provider_response"):
        assert CANARY not in str(getattr(outcome, field, "")), field


# --- classification ---------------------------------------------------------------------

EXPECTED_RULES = {
    400: (Verdict.REJECT, Reason.CLIENT_ERROR),
    401: (Verdict.REJECT, Reason.AUTH),
    403: (Verdict.REJECT, Reason.AUTH),
    404: (Verdict.REJECT, Reason.INVALID_TARGET),
    408: (Verdict.RETRY, Reason.TIMEOUT),
    410: (Verdict.REJECT, Reason.GONE),
    413: (Verdict.REJECT, Reason.TOO_LARGE),
    422: (Verdict.REJECT, Reason.CLIENT_ERROR),
    425: (Verdict.RETRY, Reason.CLIENT_ERROR),
    429: (Verdict.RATE_LIMITED, Reason.RATE_LIMITED),
}
STATUS_OF = {
    Verdict.REJECT: AttemptStatus.PERMANENT,
    Verdict.RETRY: AttemptStatus.RETRYABLE,
    Verdict.RATE_LIMITED: AttemptStatus.RATE_LIMITED,
}


def test_the_status_table_is_the_contract() -> None:
    assert {code: (r.verdict, r.reason) for code, r in STATUS_RULES.items()} == EXPECTED_RULES
    assert [code for code, r in STATUS_RULES.items() if r.disable_channel] == [410]


@pytest.mark.parametrize("status", sorted(STATUS_RULES))
def test_every_table_status_classifies_as_its_rule(status: int) -> None:
    rule = STATUS_RULES[status]
    outcome = classify(answer(status, "nope"), NOW)
    assert attempt_status(outcome) is STATUS_OF[rule.verdict]
    assert getattr(outcome, "reason", Reason.RATE_LIMITED) is rule.reason
    assert outcome.error == f"HTTP {status}: nope"  # type: ignore[union-attr]
    assert outcome.provider_response == "nope"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (answer(200, "ok"), Delivered(provider_response="ok")),
        (answer(201, '{"id": 1}'), Delivered(provider_response='{"id": 1}')),
        (answer(204), Delivered()),
        (answer(299, "odd but fine"), Delivered(provider_response="odd but fine")),
        (answer(400, "bad"), Reject(Reason.CLIENT_ERROR, "HTTP 400: bad", "bad")),
        (answer(401, "who"), Reject(Reason.AUTH, "HTTP 401: who", "who")),
        (answer(403, "no"), Reject(Reason.AUTH, "HTTP 403: no", "no")),
        (answer(404), Reject(Reason.INVALID_TARGET, "HTTP 404")),
        (
            answer(410, "gone"),
            Reject(Reason.GONE, "HTTP 410: gone", "gone", disable_channel=True),
        ),
        (answer(413, "big"), Reject(Reason.TOO_LARGE, "HTTP 413: big", "big")),
        (answer(418, "teapot"), Reject(Reason.CLIENT_ERROR, "HTTP 418: teapot", "teapot")),
        (answer(422, "field x"), Reject(Reason.CLIENT_ERROR, "HTTP 422: field x", "field x")),
        (answer(499), Reject(Reason.CLIENT_ERROR, "HTTP 499")),
        (answer(408, "slow"), Retry(Reason.TIMEOUT, "HTTP 408: slow", None, "slow")),
        (answer(425), Retry(Reason.CLIENT_ERROR, "HTTP 425")),
        (answer(429, "slow down"), RateLimited("HTTP 429: slow down", None, "slow down")),
        (answer(429, **{"Retry-After": "120"}), RateLimited("HTTP 429", 120.0)),
        (
            answer(429, **{"Retry-After": format_datetime(NOW + timedelta(seconds=30), True)}),
            RateLimited("HTTP 429", 30.0),
        ),
        (answer(429, **{"retry-after": "soon"}), RateLimited("HTTP 429")),
        (answer(500, "oops"), Retry(Reason.SERVER_ERROR, "HTTP 500: oops", None, "oops")),
        (answer(502), Retry(Reason.SERVER_ERROR, "HTTP 502")),
        (answer(503), Retry(Reason.SERVER_ERROR, "HTTP 503")),
        (answer(503, **{"Retry-After": "7"}), Retry(Reason.SERVER_ERROR, "HTTP 503", 7.0)),
        (answer(504), Retry(Reason.SERVER_ERROR, "HTTP 504")),
        (answer(599), Retry(Reason.SERVER_ERROR, "HTTP 599")),
        (answer(100), Retry(Reason.UNEXPECTED, "HTTP 100")),
        (answer(199), Retry(Reason.UNEXPECTED, "HTTP 199")),
        (answer(600, "?"), Retry(Reason.UNEXPECTED, "HTTP 600: ?", None, "?")),
        (answer(0), Retry(Reason.UNEXPECTED, "HTTP 0")),
    ],
    ids=lambda v: str(v.status) if isinstance(v, HttpResponse) else "",
)
def test_classify(response: HttpResponse, expected: Outcome) -> None:
    assert classify(response, NOW) == expected


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_permanent_and_name_the_target_without_its_query(status: int) -> None:
    location = f"https://elsewhere.example/next?token={CANARY}"
    outcome = classify(answer(status, "moved", Location=location), NOW)
    assert outcome == Reject(
        Reason.REDIRECT,
        f"HTTP {status}: redirect to https://elsewhere.example/next?… not followed",
        "moved",
    )


def test_a_redirect_without_location_still_says_so() -> None:
    assert classify(answer(302), NOW) == Reject(
        Reason.REDIRECT, "HTTP 302: redirect (no Location) not followed"
    )


def test_the_error_is_the_receivers_words_collapsed_and_capped() -> None:
    outcome = classify(answer(500, "  first line\n\n\tsecond   line  "), NOW)
    assert isinstance(outcome, Retry)
    assert outcome.error == "HTTP 500: first line second line"
    assert outcome.provider_response == "  first line\n\n\tsecond   line  "

    long = classify(answer(400, "é" * 5000), NOW)
    assert len(long.error) == MAX_ERROR_CHARS  # type: ignore[union-attr]
    assert long.error.endswith("…")  # type: ignore[union-attr]
    assert long.provider_response == "é" * 5000


@pytest.mark.parametrize("name", ["Retry-After", "retry-after", "RETRY-AFTER"])
def test_retry_after_is_found_in_any_case(name: str) -> None:
    assert classify(answer(429, **{name: "5"}), NOW) == RateLimited("HTTP 429", 5.0)


# --- exceptions -------------------------------------------------------------------------


def raised(error: BaseException) -> BaseException:
    """`error` with a real traceback, as the adapter's `except` would see it."""
    try:
        raise error
    except BaseException as caught:
        return caught


def wrapped_blocked() -> BaseException:
    try:
        try:
            raise BlockedAddress("metadata.example", "169.254.169.254")
        except BlockedAddress as inner:
            raise aiohttp.ClientConnectionError("resolver failed") from inner
    except aiohttp.ClientConnectionError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "reason", "message"),
    [
        (RequestTimeout(0.3), Reason.TIMEOUT, "timed out after 0.3 s"),
        (TimeoutError(), Reason.TIMEOUT, "timed out"),
        (TimeoutError("socket"), Reason.TIMEOUT, "timed out"),
        (aiohttp.ServerTimeoutError("read"), Reason.TIMEOUT, "timed out"),
        (
            aiohttp.ConnectionTimeoutError(f"Connection timeout to host http://h/?k={CANARY}"),
            Reason.TIMEOUT,
            "timed out",
        ),
        (aiohttp.ServerDisconnectedError(), Reason.CONNECTION, "connection failed: "),
        (aiohttp.ClientOSError(104, "Connection reset by peer"), Reason.CONNECTION, "reset"),
        (aiohttp.ClientPayloadError("not completed"), Reason.CONNECTION, "not completed"),
        (ConnectionResetError(104, "reset"), Reason.CONNECTION, "connection failed: "),
        (ConnectionRefusedError(), Reason.CONNECTION, "ConnectionRefusedError"),
        (OSError(101, "Network is unreachable"), Reason.CONNECTION, "unreachable"),
        (
            aiohttp.ClientConnectionError(f"lost http://u:{CANARY}@h/p?k={CANARY}"),
            Reason.CONNECTION,
            "lost http://h/p?…",
        ),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_retryable_exceptions(error: BaseException, reason: Reason, message: str) -> None:
    outcome = outcome_for_exception(raised(error))
    assert isinstance(outcome, Retry)
    assert outcome.reason is reason
    assert message in outcome.error
    assert_no_canary(outcome)


@pytest.mark.parametrize(
    "error", [ValueError(f"boom at https://h/x?token={CANARY}"), KeyError("missing")]
)
def test_other_exceptions_are_left_to_the_catch_all(error: BaseException) -> None:
    """A bug is no failure of the send: the adapter's catch-all reports it (and logs it)."""
    assert outcome_for_exception(raised(error)) is None


@pytest.mark.parametrize(
    ("error", "reason", "message"),
    [
        (
            BlockedAddress("10.0.0.1", "10.0.0.1"),
            Reason.BLOCKED_ADDRESS,
            "10.0.0.1 is a private address",
        ),
        (wrapped_blocked(), Reason.BLOCKED_ADDRESS, "'metadata.example' resolves to"),
        (InvalidTarget("ftp://h/: only http"), Reason.INVALID_TARGET, "invalid target: "),
        (
            aiohttp.InvalidURL(f"http://u:{CANARY}@h/?k={CANARY}"),
            Reason.INVALID_TARGET,
            "invalid target: http://h/?…",
        ),
    ],
    ids=["blocked", "blocked-wrapped", "invalid-target", "invalid-url"],
)
def test_permanent_exceptions(error: BaseException, reason: Reason, message: str) -> None:
    outcome = outcome_for_exception(error)
    assert isinstance(outcome, Reject)
    assert outcome.reason is reason
    assert message in outcome.error
    assert_no_canary(outcome)


# --- URL redaction ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"https://hooks.example.com/hook?key={CANARY}", "https://hooks.example.com/hook?…"),
        (f"https://bot:{CANARY}@example.com:8443/p?q={CANARY}#x", "https://example.com:8443/p?…"),
        (f"https://{CANARY}@example.com/", "https://example.com/"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("https://example.com", "https://example.com"),
        (f"/relative?token={CANARY}", "/relative?…"),
        (f"//example.com/x?{CANARY}", "//example.com/x?…"),
        (f"http://[::1?{CANARY}", "<unparseable URL>"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_scrub_redacts_every_url_in_a_text() -> None:
    text = f"a https://x/?t={CANARY} b 'http://u:{CANARY}@y/p' c"
    assert scrub(text) == "a https://x/?… b 'http://y/p' c"


# --- the client, before any connection ------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"ftp://127.0.0.1/x?token={CANARY}",
        f"file:///etc/passwd?{CANARY}",
        f"http:///no-host?{CANARY}",
        f"127.0.0.1/no-scheme?{CANARY}",
        f"http://u:{CANARY}@[::1/?{CANARY}",
    ],
)
async def test_invalid_targets_are_refused_before_aiohttp(url: str) -> None:
    async with HttpClient(allowed_networks=LOOPBACK) as client:
        with pytest.raises(InvalidTarget) as caught:
            await client.post(url, body=b"", headers={}, timeout_s=1)
    assert CANARY not in str(caught.value)
    outcome = outcome_for_exception(caught.value)
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.INVALID_TARGET
    assert_no_canary(outcome)


async def test_post_needs_start() -> None:
    with pytest.raises(RuntimeError, match="start"):
        await HttpClient(allowed_networks=LOOPBACK).post(
            "http://127.0.0.1:9/", body=b"", headers={}, timeout_s=1
        )


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan")])
async def test_a_send_always_has_a_timeout(timeout_s: float) -> None:
    # aiohttp would read 0 as "no timeout"; a send must never outlive its lease.
    async with HttpClient(allowed_networks=LOOPBACK) as client:
        with pytest.raises(ValueError, match="timeout_s"):
            await client.post("http://127.0.0.1:9/", body=b"", headers={}, timeout_s=timeout_s)


async def test_close_is_idempotent() -> None:
    client = HttpClient()
    await client.start()
    await client.start()
    await client.close()
    await client.close()


# --- end to end against a real server on 127.0.0.1 ------------------------------------


class Receiver:
    """A loopback server whose routes record the requests they get."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.release = asyncio.Event()

    def route(self, path: str, handler: Handler) -> None:
        async def recording(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            self.requests.append((request.path, dict(request.headers), body))
            return await handler(request)

        self.app.router.add_route("*", path, recording)

    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, Callable[[str], str]]]:
    recv = Receiver()

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="thanks", headers={"X-Receipt": "r-1"})

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"/target?token={CANARY}")

    async def slow(request: web.Request) -> web.Response:
        # Held until the test has seen the timeout, so the server shuts down promptly.
        await asyncio.wait_for(recv.release.wait(), timeout=10)
        return web.Response(text="too late")

    async def huge(request: web.Request) -> web.Response:
        return web.Response(body=b"a" * 1_000_000)

    async def gzipped(request: web.Request) -> web.Response:
        response = web.Response(text="squeezed " * 100)
        response.enable_compression(web.ContentCoding.gzip)
        return response

    for path, handler in [
        ("/ok", ok),
        ("/moved", moved),
        ("/target", ok),
        ("/slow", slow),
        ("/huge", huge),
        ("/gzip", gzipped),
    ]:
        recv.route(path, handler)
    async with TestServer(recv.app, host="127.0.0.1") as server:
        yield recv, lambda path: f"http://127.0.0.1:{server.port}{path}"
        recv.release.set()


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    async with HttpClient(allowed_networks=LOOPBACK, user_agent="tidings-test/1") as http:
        yield http


async def test_a_2xx_is_delivered_with_body_headers_and_agent(
    receiver: tuple[Receiver, Callable[[str], str]], client: HttpClient
) -> None:
    recv, url = receiver
    response = await client.post(
        url("/ok?token=x"), body=b'{"a":1}', headers={"X-Extra": "1"}, timeout_s=5
    )
    assert response.status == 200
    assert response.headers["x-receipt"] == "r-1"  # case-insensitive
    assert classify(response, NOW) == Delivered(provider_response="thanks")
    [(path, headers, body)] = recv.requests
    assert (path, body) == ("/ok", b'{"a":1}')
    assert headers["User-Agent"] == "tidings-test/1"
    assert headers["X-Extra"] == "1"


async def test_a_redirect_is_returned_not_followed(
    receiver: tuple[Receiver, Callable[[str], str]], client: HttpClient
) -> None:
    recv, url = receiver
    response = await client.post(url("/moved"), body=b"{}", headers={}, timeout_s=5)
    outcome = classify(response, NOW)
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.REDIRECT
    assert outcome.error == "HTTP 302: redirect to /target?… not followed"
    assert recv.paths() == ["/moved"]  # the target received no request
    assert_no_canary(outcome)


async def test_a_slow_receiver_times_out(
    receiver: tuple[Receiver, Callable[[str], str]], client: HttpClient
) -> None:
    recv, url = receiver
    with pytest.raises(RequestTimeout) as caught:
        await client.post(url(f"/slow?token={CANARY}"), body=b"{}", headers={}, timeout_s=0.3)
    recv.release.set()
    outcome = outcome_for_exception(caught.value)
    assert outcome == Retry(Reason.TIMEOUT, "timed out after 0.3 s")


async def test_a_huge_body_is_read_only_up_to_the_cap(
    receiver: tuple[Receiver, Callable[[str], str]], client: HttpClient
) -> None:
    _, url = receiver
    response = await client.post(url("/huge"), body=b"{}", headers={}, timeout_s=5)
    assert response.status == 200
    assert response.text == "a" * MAX_RESPONSE_BYTES
    # The connection with the unread rest is dropped, not reused: the next send still works.
    again = await client.post(url("/ok"), body=b"{}", headers={}, timeout_s=5)
    assert again.text == "thanks"


async def test_compressed_answers_are_decoded(
    receiver: tuple[Receiver, Callable[[str], str]], client: HttpClient
) -> None:
    _, url = receiver
    response = await client.post(
        url("/gzip"), body=b"{}", headers={"Accept-Encoding": "gzip"}, timeout_s=5
    )
    assert response.text == "squeezed " * 100


async def test_a_dropped_connection_is_retryable(client: HttpClient) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(aiohttp.ServerDisconnectedError) as caught:
            await client.post(
                f"http://127.0.0.1:{port}/?token={CANARY}", body=b"{}", headers={}, timeout_s=5
            )
    finally:
        server.close()
        await server.wait_closed()
    outcome = outcome_for_exception(caught.value)
    assert isinstance(outcome, Retry)
    assert outcome.reason is Reason.CONNECTION
    assert_no_canary(outcome)


async def test_a_refused_connection_is_retryable(client: HttpClient) -> None:
    with socket.socket() as probe:  # a loopback port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        await client.post(
            f"http://u:{CANARY}@127.0.0.1:{port}/?token={CANARY}",
            body=b"{}",
            headers={},
            timeout_s=5,
        )
    outcome = outcome_for_exception(caught.value)
    assert isinstance(outcome, Retry)
    assert outcome.reason is Reason.CONNECTION
    assert f"127.0.0.1:{port}" in outcome.error
    assert_no_canary(outcome)
