"""Run a vendor emulator (an aiohttp app) on 127.0.0.1 in a background thread.

Emulators answer the way channels.md says the real service does — codes, rate limits, size
limits, signing — so adapters are tested against behaviour, not against our own guesses.
Each records what it received; tests read `received` and may switch behaviours at run time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


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
