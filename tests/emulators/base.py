"""What every vendor emulator shares: an aiohttp app on 127.0.0.1 in a background thread,
the record of what it received, a script of the next answers, and the rate limits vendors use
(a sliding window, a token bucket).

Emulators answer the way channels.md says the real service does — codes, rate limits, size
limits, signing — so adapters are tested against behaviour, not against our own guesses.
Each records what it received; tests read `received` and may switch behaviours at run time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiohttp import web

T = TypeVar("T")


@dataclass
class Received:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)


class Emulator:
    """Subclass and implement `routes()`; call `record(request, body)` in handlers."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def record(self, request: web.Request) -> bytes:
        body = await request.read()
        with self._lock:
            self.received.append(
                Received(
                    request.path,
                    dict(request.query),
                    {k.lower(): v for k, v in request.headers.items()},
                    body,
                )
            )
        return body

    def requests(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def start(self) -> Emulator:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(
                self._runner.cleanup() if self._runner else asyncio.sleep(0)
            )
            self._loop.close()

        self._thread = threading.Thread(target=run, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("emulator did not start")
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class Script(Generic[T]):
    """The next answers, in order: tests push from their thread, the emulator pops in its own."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._lock = threading.Lock()

    def push(self, *items: T) -> None:
        with self._lock:
            self._items.extend(items)

    def pop(self) -> T | None:
        with self._lock:
            return self._items.popleft() if self._items else None


class SlidingWindow:
    """At most `limit` events in any `window_s` seconds."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._times: deque[float] = deque()

    def full(self, now: float) -> bool:
        while self._times and self._times[0] <= now - self.window_s:
            self._times.popleft()
        return len(self._times) >= self.limit

    def add(self, now: float) -> None:
        self._times.append(now)

    def admit(self, now: float) -> bool:
        """Count one more event unless the window is full; whether it was counted."""
        if self.full(now):
            return False
        self.add(now)
        return True


class TokenBucket:
    """`burst` tokens, refilled at `rate_per_s`; `take` answers the wait when empty."""

    def __init__(self, rate_per_s: float, burst: int, now: float) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def take(self, now: float) -> float:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate_per_s)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate_per_s
