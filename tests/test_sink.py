"""The test sink itself, exercised by real clients (urllib, http.client, aiohttp) over TCP."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import Message
from typing import IO

import aiohttp
import pytest

from tests.sink import Answer, Received, Sink


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    body: bytes


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


# No proxy: an http_proxy in the environment must not reroute 127.0.0.1.
PLAIN = urllib.request.build_opener(urllib.request.ProxyHandler({}))
NO_REDIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def call(
    url: str,
    body: bytes | None = None,
    *,
    method: str | None = None,
    headers: Mapping[str, str] | None = None,
    opener: urllib.request.OpenerDirector = PLAIN,
    timeout_s: float = 10.0,
) -> Reply:
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with opener.open(request, timeout=timeout_s) as resp:
            return Reply(resp.status, resp.headers, resp.read())
    except urllib.error.HTTPError as err:
        with err:
            return Reply(err.code, err.headers, err.read())


class Background:
    """Run one blocking call on a thread; keep its result or exception."""

    def __init__(self, url: str, body: bytes | None = b"payload") -> None:
        self.reply: Reply | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(url, body), daemon=True)
        self._thread.start()

    def _run(self, url: str, body: bytes | None) -> None:
        try:
            self.reply = call(url, body, timeout_s=30.0)
        except BaseException as exc:
            self.error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout_s: float = 10.0) -> None:
        self._thread.join(timeout_s)
        assert self.done, "the client call did not finish"


@pytest.fixture
def sink() -> Iterator[Sink]:
    with Sink() as s:
        yield s


def test_url_and_port(sink: Sink) -> None:
    assert sink.running
    assert sink.port > 0
    assert sink.url() == f"http://127.0.0.1:{sink.port}/hook"
    assert sink.url("/a/b") == f"http://127.0.0.1:{sink.port}/a/b"
    assert sink.url("x") == f"http://127.0.0.1:{sink.port}/x"
    with pytest.raises(RuntimeError, match="no port"):
        Sink().url()


def test_default_answer_is_200_ok(sink: Sink) -> None:
    reply = call(sink.url("/anything"))
    assert (reply.status, reply.body) == (200, b"ok")
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_script_then_path_default_then_global_default(sink: Sink) -> None:
    sink.script("/hook", Answer(500), Answer(500, body="still down"), Answer(200, body="yes"))
    sink.default("/hook", Answer(202, body="later"))
    assert sink.remaining("/hook") == 3
    got = [call(sink.url("/hook"), b"{}") for _ in range(5)]
    assert [(r.status, r.body) for r in got] == [
        (500, b"ok"),
        (500, b"still down"),
        (200, b"yes"),
        (202, b"later"),
        (202, b"later"),
    ]
    assert sink.remaining("/hook") == 0
    assert call(sink.url("/other")).status == 200  # other paths are untouched
    sink.default(None, Answer(418, body="teapot"))
    assert (call(sink.url("/other")).status, call(sink.url("/hook")).status) == (418, 202)
    sink.script("/hook", Answer(503))  # a new script takes precedence again
    assert call(sink.url("/hook")).status == 503


def test_script_rejects_non_answers(sink: Sink) -> None:
    with pytest.raises(TypeError):
        sink.script("/hook", 500)  # type: ignore[arg-type]


def test_answer_bodies_json_bytes_and_text(sink: Sink) -> None:
    sink.script(
        "/b",
        Answer(body={"ok": True, "n": [1, 2]}),
        Answer(body=b"\x00\xffraw"),
        Answer(body="héllo"),
        Answer(body={"x": 1}, headers={"Content-Type": "application/vnd.x+json"}),
        Answer(204),
    )
    first = call(sink.url("/b"))
    assert first.headers["Content-Type"] == "application/json"
    assert json.loads(first.body) == {"ok": True, "n": [1, 2]}
    second = call(sink.url("/b"))
    assert (second.body, second.headers["Content-Type"]) == (
        b"\x00\xffraw",
        "application/octet-stream",
    )
    assert call(sink.url("/b")).body.decode() == "héllo"
    assert call(sink.url("/b")).headers["Content-Type"] == "application/vnd.x+json"
    assert (call(sink.url("/b")).status, call(sink.url("/b")).status) == (204, 200)


def test_received_records_the_request(sink: Sink) -> None:
    before_mono, before_wall = time.monotonic(), time.time()
    payload = {"event": "finding.created", "id": 7}
    call(
        sink.url("/hook?attempt=2"),
        json.dumps(payload).encode(),
        method="PUT",
        headers={"Content-Type": "application/json", "X-Tidings-Signature": "v1=abc"},
    )
    call(sink.url("/bin"), b"\x00\x01\xfe\xff")
    [got] = sink.requests("/hook")
    assert isinstance(got, Received)
    assert (got.path, got.method, got.query) == ("/hook", "PUT", "attempt=2")
    assert got.json() == payload
    assert got.text() == json.dumps(payload)
    assert got.headers["x-tidings-signature"] == "v1=abc"
    assert got.headers["content-type"] == "application/json"
    assert all(name == name.lower() for name in got.headers)
    assert before_mono <= got.at <= time.monotonic()
    assert before_wall - 1 <= got.wall <= time.time() + 1
    assert sink.requests("/bin")[0].body == b"\x00\x01\xfe\xff"
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.path = "/x"  # type: ignore[misc]


def test_retry_after_and_other_headers_pass_through(sink: Sink) -> None:
    sink.script("/hook", Answer(429, body="slow down", headers={"Retry-After": "7", "X-A": "b"}))
    reply = call(sink.url("/hook"), b"{}")
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "7"
    assert reply.headers["X-A"] == "b"


def test_count_and_clear(sink: Sink) -> None:
    for path in ["/a", "/a", "/b"]:
        call(sink.url(path))
    assert (sink.count(), sink.count("/a"), sink.count("/b"), sink.count("/c")) == (3, 2, 1, 0)
    assert [r.path for r in sink.requests()] == ["/a", "/a", "/b"]
    copy = sink.requests()
    sink.clear()
    assert (sink.count(), sink.count("/a"), sink.requests()) == (0, 0, [])
    assert len(copy) == 3  # requests() handed out a copy
    call(sink.url("/a"))
    assert sink.count("/a") == 1


def test_clear_keeps_scripts_reset_forgets_them(sink: Sink) -> None:
    sink.script("/a", Answer(500), Answer(501))
    sink.default("/a", Answer(202))
    assert call(sink.url("/a")).status == 500
    sink.clear()
    assert call(sink.url("/a")).status == 501
    sink.reset()
    assert (sink.count(), call(sink.url("/a")).status) == (0, 200)


def test_hang_is_recorded_on_arrival_and_held_until_release(sink: Sink) -> None:
    sink.script("/slow", Answer(201, body="finally", hang=True))
    client = Background(sink.url("/slow"), b"mid-send")
    seen: list[list[Received]] = []
    waiter = threading.Thread(target=lambda: seen.append(sink.wait_for(1, "/slow")))
    waiter.start()
    waiter.join(10)
    assert seen, "wait_for did not return"
    assert seen[0][0].body == b"mid-send"
    time.sleep(0.2)
    assert not client.done, "a hanging answer must hold the request open"
    assert sink.held == 1
    sink.release()
    client.join()
    assert client.error is None
    assert client.reply is not None
    assert (client.reply.status, client.reply.body) == (201, b"finally")
    assert sink.held == 0
    assert call(sink.url("/slow")).status == 200  # the script is used up: no more hangs


def test_release_without_held_requests_is_a_no_op(sink: Sink) -> None:
    sink.release()
    assert call(sink.url()).status == 200


def test_close_drops_the_connection_without_an_answer(sink: Sink) -> None:
    sink.script("/cut", Answer(close=True), Answer(200))
    with pytest.raises(ConnectionError):
        call(sink.url("/cut"), b"x")
    assert sink.count("/cut") == 1  # it still arrived
    assert call(sink.url("/cut"), b"x").status == 200  # the next answer is normal


def test_delay_answers_late(sink: Sink) -> None:
    sink.script("/late", Answer(200, body="late", delay_s=0.3))
    started = time.monotonic()
    reply = call(sink.url("/late"))
    answered = time.monotonic()
    assert reply.body == b"late"
    assert answered - started >= 0.3
    [got] = sink.requests("/late")
    assert answered - got.at >= 0.3  # recorded on arrival, before the delay


def test_redirect_is_a_real_redirect(sink: Sink) -> None:
    sink.redirect("/old", sink.url("/new"))
    reply = call(sink.url("/old"), b"{}", opener=NO_REDIRECT)
    assert reply.status == 302
    assert reply.headers["Location"] == sink.url("/new")
    assert sink.count("/new") == 0
    # Persistent by default; a following client does land on the new location.
    followed = call(sink.url("/old"))
    assert (followed.status, sink.count("/old"), sink.count("/new")) == (200, 2, 1)
    sink.redirect("/once", sink.url("/new"), 307, times=1)
    assert call(sink.url("/once"), opener=NO_REDIRECT).status == 307
    assert call(sink.url("/once"), opener=NO_REDIRECT).status == 200


def test_unusual_statuses_pass_through(sink: Sink) -> None:
    sink.script("/s", Answer(599, body="odd"), Answer(451))
    assert (call(sink.url("/s")).status, call(sink.url("/s")).status) == (599, 451)


def test_wait_for_timeout_says_what_arrived(sink: Sink) -> None:
    call(sink.url("/elsewhere"), b'{"x": 1}')
    with pytest.raises(AssertionError) as info:
        sink.wait_for(1, "/hook", timeout_s=0.2)
    message = str(info.value)
    assert "/hook" in message
    assert "got 0" in message
    assert "GET /elsewhere" not in message
    assert "POST /elsewhere" in message
    assert sink.wait_for(1, timeout_s=0.2)[0].path == "/elsewhere"


def test_many_threads_each_request_recorded_exactly_once(sink: Sink) -> None:
    def post(i: int) -> int:
        return call(sink.url("/hook"), json.dumps({"id": i}).encode()).status

    with ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(pool.map(post, range(500)))
    assert statuses == [200] * 500
    got = sink.wait_for(500, "/hook", timeout_s=5)
    assert len(got) == 500
    assert sorted(r.json()["id"] for r in got) == list(range(500))
    assert sink.count() == 500


_PROCESS_CLIENT = """
import http.client, sys
port, n, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # one keep-alive connection
for i in range(n):
    conn.request("POST", "/proc", body=f"{tag}:{i}".encode())
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
conn.close()
"""


def test_client_processes_with_keep_alive(sink: Sink) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", _PROCESS_CLIENT, str(sink.port), "300", f"p{k}"])
        for k in range(4)
    ]
    try:
        codes = [p.wait(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0, 0, 0]
    bodies = {r.text() for r in sink.requests("/proc")}
    assert len(bodies) == sink.count("/proc") == 1200


def test_stop_is_idempotent_and_drops_held_and_delayed_requests() -> None:
    sink = Sink().start()
    sink.script("/slow", Answer(hang=True))
    sink.script("/late", Answer(delay_s=30))
    held, late = Background(sink.url("/slow")), Background(sink.url("/late"))
    sink.wait_for(1, "/slow")
    sink.wait_for(1, "/late")
    started = time.monotonic()
    sink.stop()
    assert time.monotonic() - started < 5
    assert not sink.running
    for client in (held, late):
        client.join()
        assert isinstance(client.error, ConnectionError), client.error
    sink.stop()  # idempotent
    sink.stop()
    assert sink.count() == 2  # what arrived is still readable after stop
    sink.release()  # harmless when stopped


def test_stopped_sink_refuses_then_restarts_on_the_same_port() -> None:
    with Sink() as sink:
        port = sink.port
        assert call(sink.url()).status == 200
    with pytest.raises(urllib.error.URLError) as info:
        call(sink.url())
    assert isinstance(info.value.reason, ConnectionRefusedError)
    with sink:
        assert sink.port == port
        assert call(sink.url()).status == 200
        assert sink.count() == 2
    with pytest.raises(RuntimeError, match="already started"), sink:
        sink.start()


# -- from async tests -------------------------------------------------------------


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))


async def test_async_keep_alive_burst(sink: Sink) -> None:
    async with _session() as http:

        async def one(i: int) -> None:
            async with http.post(sink.url("/hook"), json={"id": i}) as resp:
                assert resp.status == 200
                assert await resp.read() == b"ok"

        await asyncio.gather(*(one(i) for i in range(1000)))
    got = await sink.await_for(1000, "/hook", timeout_s=5)
    assert sorted(r.json()["id"] for r in got) == list(range(1000))


async def test_async_hang_await_for_and_release(sink: Sink) -> None:
    sink.script("/slow", Answer(200, body={"done": True}, hang=True))
    async with _session() as http:

        async def post() -> tuple[int, object]:
            async with http.post(sink.url("/slow"), json={"n": 1}) as resp:
                return resp.status, await resp.json()

        task = asyncio.create_task(post())
        [got] = await sink.await_for(1, "/slow")
        assert got.json() == {"n": 1}
        await asyncio.sleep(0.1)
        assert not task.done()
        sink.release()
        assert await task == (200, {"done": True})


async def test_async_close_is_a_connection_error(sink: Sink) -> None:
    sink.script("/cut", Answer(close=True))
    async with _session() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with http.post(sink.url("/cut"), data=b"x") as resp:
                await resp.read()
    assert sink.count("/cut") == 1


async def test_async_await_for_timeout(sink: Sink) -> None:
    with pytest.raises(AssertionError, match="expected at least 2 request"):
        await sink.await_for(2, "/hook", timeout_s=0.1)


async def test_sink_answers_while_the_callers_loop_is_blocked(sink: Sink) -> None:
    client = Background(sink.url("/hook"))
    sink.wait_for(1, "/hook")  # blocks this loop; the sink's own loop keeps serving
    client.join()
    assert client.reply is not None
    assert client.reply.status == 200
