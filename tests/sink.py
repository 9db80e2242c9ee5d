"""A programmable HTTP sink: a real aiohttp server on 127.0.0.1 for delivery tests.

The server runs on its own event loop in a background thread, so it keeps
answering while a test's loop is blocked and while worker subprocesses post to
it.  Every request that reaches it is recorded on arrival (before any scripted
delay or hang), and each path answers from a script, then from its default.

Example::

    from tests.sink import Answer, Sink

    with Sink() as sink:
        sink.script("/hook", Answer(500), Answer(503, headers={"Retry-After": "2"}), Answer(200))
        sink.default("/hook", Answer(204))  # once the script is used up (default: 200 "ok")
        sink.script("/slow", Answer(hang=True))  # held open until sink.release() or stop()
        sink.script("/cut", Answer(close=True))  # connection dropped, no answer at all
        sink.redirect("/old", sink.url("/new"))  # every request to /old gets a 302

        start_worker(webhook_url=sink.url("/hook"))
        got = sink.wait_for(3, "/hook")  # or: await sink.await_for(3, "/hook")
        assert got[0].json()["event"] == "finding.created"
        assert got[0].headers["content-type"] == "application/json"

        held = sink.wait_for(1, "/slow")  # the worker is now mid-send
        kill_worker()  # e.g. kill -9
        sink.release()  # answer every held request (no-op if none)

Outside a ``with`` block, call ``start()`` and ``stop()``; ``stop()`` is idempotent
and drops held or delayed requests (their connections close without an answer).
A stopped sink can be started again: it re-binds the same port, which is how a
test simulates an endpoint that goes down and comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

__all__ = ["Answer", "Received", "Sink"]

Body = str | bytes | dict[str, Any] | list[Any]

_NO_BODY_STATUSES = frozenset({204, 304})
_MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    """How the sink answers one request.

    ``body`` may be ``str`` (text/plain), ``bytes`` (application/octet-stream) or a
    ``dict``/``list`` (serialised as JSON, application/json); a ``Content-Type`` in
    ``headers`` overrides that.  The steps run in order: ``hang`` (held until
    ``Sink.release()``), then ``delay_s``, then either ``close`` (the connection is
    dropped without any answer) or the answer itself.
    """

    status: int = 200
    body: Body = "ok"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hang: bool = False
    close: bool = False

    def payload(self) -> tuple[bytes, str]:
        """The encoded body and its default content type."""
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), "text/plain; charset=utf-8"
        return json.dumps(self.body).encode(), "application/json"


@dataclass(frozen=True)
class Received:
    """One request as it reached the sink (headers have lower-cased names)."""

    path: str
    method: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() on arrival
    wall: float  # time.time() on arrival
    query: str = ""  # the raw query string, without "?"

    def json(self) -> Any:
        return json.loads(self.body)

    def text(self) -> str:
        return self.body.decode()

    def describe(self) -> str:
        preview = self.body[:80].decode(errors="replace")
        more = "…" if len(self.body) > 80 else ""
        query = f"?{self.query}" if self.query else ""
        return f"{self.method} {self.path}{query} {preview!r}{more}"


class Sink:
    """A real HTTP server on 127.0.0.1 that records requests and answers from scripts.

    Thread-safe: every method may be called from any thread (the test's thread, a
    test's event loop, helper threads).  ``port=0`` picks a free port; ``timeout_s``
    bounds how long ``start()`` and ``stop()`` may take.
    """

    HOST = "127.0.0.1"

    def __init__(self, port: int = 0, *, timeout_s: float = 10.0) -> None:
        self._port = port
        self._timeout_s = timeout_s
        self._cond = threading.Condition()
        self._received: list[Received] = []
        self._counts: dict[str, int] = {}
        self._scripts: dict[str, deque[Answer]] = {}
        self._defaults: dict[str, Answer] = {}
        self._fallback = Answer()
        self._state_lock = threading.Lock()  # serialises start() and stop()
        # Set while running; the loop, the stop event and the held events belong to the
        # server thread and are only touched there (other threads go through the loop).
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._held: set[asyncio.Event] = set()
        self._errors: list[BaseException] = []

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Self:
        """Bind and serve in a background thread; returns once it accepts connections."""
        with self._state_lock:
            if self._thread is not None:
                raise RuntimeError("sink already started")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.HOST, self._port))
            except BaseException:
                sock.close()
                raise
            self._port = sock.getsockname()[1]
            ready = threading.Event()
            errors: list[BaseException] = []
            thread = threading.Thread(
                target=self._run,
                args=(sock, ready, errors),
                name=f"sink:{self._port}",
                daemon=True,
            )
            thread.start()
            if not ready.wait(self._timeout_s):
                raise RuntimeError(f"sink on port {self._port} did not start in time")
            if errors:
                thread.join(self._timeout_s)
                raise RuntimeError(f"sink on port {self._port} failed to start") from errors[0]
            self._thread = thread
            self._errors = errors
            return self

    def stop(self) -> None:
        """Stop serving; idempotent.  Held and delayed requests are dropped unanswered."""
        with self._state_lock:
            thread, loop, stopping = self._thread, self._loop, self._stopping
            if thread is None:
                return
            if loop is not None and stopping is not None:
                with contextlib.suppress(RuntimeError):  # the loop already ended
                    loop.call_soon_threadsafe(stopping.set)
            thread.join(self._timeout_s)
            if thread.is_alive():
                raise RuntimeError(f"sink on port {self._port} did not stop in time")
            self._thread = None
            self._loop = None
            self._stopping = None
            if self._errors:
                raise RuntimeError(f"sink on port {self._port} crashed") from self._errors[0]

    @property
    def running(self) -> bool:
        return self._thread is not None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port == 0:
            raise RuntimeError("the sink has no port until start()")
        return self._port

    def url(self, path: str = "/hook") -> str:
        if not path.startswith("/"):
            path = "/" + path
        return f"http://{self.HOST}:{self.port}{path}"

    # -- what arrived ----------------------------------------------------------

    def requests(self, path: str | None = None) -> list[Received]:
        """A copy of the recorded requests (all, or those to ``path``), in arrival order."""
        with self._cond:
            return self._select(path)

    def count(self, path: str | None = None) -> int:
        with self._cond:
            return self._count(path)

    def clear(self) -> None:
        """Forget the recorded requests (scripts and defaults are kept)."""
        with self._cond:
            self._received.clear()
            self._counts.clear()

    def wait_for(
        self, count: int, path: str | None = None, timeout_s: float = 10.0
    ) -> list[Received]:
        """Block until at least ``count`` requests (to ``path``) arrived; return them all.

        Raises ``AssertionError`` describing what did arrive on timeout.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._count(path) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(self._timeout_message(count, path, timeout_s))
                self._cond.wait(remaining)
            return self._select(path)

    async def await_for(
        self, count: int, path: str | None = None, timeout_s: float = 10.0
    ) -> list[Received]:
        """``wait_for`` for async tests: polls without blocking the caller's loop."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._cond:
                if self._count(path) >= count:
                    return self._select(path)
                if time.monotonic() >= deadline:
                    raise AssertionError(self._timeout_message(count, path, timeout_s))
            await asyncio.sleep(0.005)

    # -- how to answer ---------------------------------------------------------

    def script(self, path: str, *answers: Answer) -> None:
        """Queue answers for ``path``: successive requests consume them in order.

        Calling it again appends to what is left of the script.
        """
        for answer in answers:
            if not isinstance(answer, Answer):
                raise TypeError(f"expected Answer, got {answer!r}")
        with self._cond:
            self._scripts.setdefault(path, deque()).extend(answers)

    def default(self, path: str | None, answer: Answer) -> None:
        """The answer for ``path`` once its script is used up (``None``: every path)."""
        if not isinstance(answer, Answer):
            raise TypeError(f"expected Answer, got {answer!r}")
        with self._cond:
            if path is None:
                self._fallback = answer
            else:
                self._defaults[path] = answer

    def redirect(
        self, path: str, location: str, status: int = 302, *, times: int | None = None
    ) -> None:
        """Answer ``path`` with a redirect to ``location``.

        By default every request to ``path`` is redirected (it becomes the path's
        default); with ``times=n`` only the next ``n`` requests are (scripted).
        """
        answer = Answer(status=status, body="", headers={"Location": location})
        if times is None:
            self.default(path, answer)
        else:
            self.script(path, *([answer] * times))

    def remaining(self, path: str) -> int:
        """How many scripted answers for ``path`` are still unused."""
        with self._cond:
            return len(self._scripts.get(path, ()))

    def reset(self) -> None:
        """Forget requests, scripts and defaults, and release held requests."""
        with self._cond:
            self._received.clear()
            self._counts.clear()
            self._scripts.clear()
            self._defaults.clear()
            self._fallback = Answer()
        self.release()

    def release(self) -> None:
        """Let every currently held (``hang=True``) request answer.  Callable from any thread."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._release_held)

    @property
    def held(self) -> int:
        """How many requests are held by ``hang=True`` right now."""
        return len(self._held)

    # -- internals (the lock is held by the caller) ----------------------------

    def _count(self, path: str | None) -> int:
        return len(self._received) if path is None else self._counts.get(path, 0)

    def _select(self, path: str | None) -> list[Received]:
        if path is None:
            return list(self._received)
        return [r for r in self._received if r.path == path]

    def _timeout_message(self, count: int, path: str | None, timeout_s: float) -> str:
        target = "any path" if path is None else path
        lines = [
            f"sink: expected at least {count} request(s) to {target} within {timeout_s}s, "
            f"got {self._count(path)}; {len(self._received)} request(s) arrived in all"
        ]
        shown = self._received[-20:]
        if len(self._received) > len(shown):
            lines.append(f"  … {len(self._received) - len(shown)} earlier request(s)")
        lines.extend(f"  {r.describe()}" for r in shown)
        return "\n".join(lines)

    def _arrive(self, received: Received) -> Answer:
        with self._cond:
            self._received.append(received)
            self._counts[received.path] = self._counts.get(received.path, 0) + 1
            script = self._scripts.get(received.path)
            if script:
                answer = script.popleft()
            else:
                answer = self._defaults.get(received.path, self._fallback)
            self._cond.notify_all()
            return answer

    # -- the server thread -----------------------------------------------------

    def _run(
        self, sock: socket.socket, ready: threading.Event, errors: list[BaseException]
    ) -> None:
        try:
            asyncio.run(self._serve(sock, ready))
        except BaseException as exc:  # reported by start()
            errors.append(exc)
        finally:
            sock.close()  # a no-op once the server closed it
            ready.set()

    async def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        stopping = asyncio.Event()
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.SockSite(runner, sock, backlog=1024)
            await site.start()
            self._stopping = stopping
            self._loop = asyncio.get_running_loop()
            ready.set()
            await stopping.wait()
            self._release_held()
        finally:
            await runner.cleanup()

    def _release_held(self) -> None:
        held, self._held = self._held, set()
        for event in held:
            event.set()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        at, wall = time.monotonic(), time.time()
        try:
            body = await request.read()
        except web.HTTPException:
            raise  # e.g. 413 for a body over the size limit
        except Exception:
            return _drop(request)  # the client went away mid-body: not a request
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        answer = self._arrive(
            Received(
                path=request.path,
                method=request.method,
                headers=headers,
                body=body,
                at=at,
                wall=wall,
                query=request.query_string,
            )
        )
        stopping = self._stopping
        assert stopping is not None
        if answer.hang and not stopping.is_set():
            # Registered in the same loop step as the recording above, so a test that
            # saw this request can release() it; stopping releases every held event.
            released = asyncio.Event()
            self._held.add(released)
            try:
                await released.wait()
            finally:
                self._held.discard(released)
        if answer.delay_s > 0 and not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), answer.delay_s)
        if answer.close or stopping.is_set():
            return _drop(request)
        data, content_type = answer.payload()
        out_headers = dict(answer.headers)
        if answer.status in _NO_BODY_STATUSES or answer.status < 200:
            data = b""
        elif not any(k.lower() == "content-type" for k in out_headers):
            out_headers["Content-Type"] = content_type
        return web.Response(status=answer.status, body=data, headers=out_headers)


def _drop(request: web.BaseRequest) -> web.Response:
    """Close the connection without answering.

    aiohttp then fails to write the returned response, treats that as the client
    having gone away (no 500, nothing logged above debug) and ends the connection.
    """
    transport = request.transport
    if transport is not None:
        transport.close()
    return web.Response(status=599, body=b"")
