"""A TCP proxy between the workers and the database that the suite controls: it passes,
drops (resets every connection and refuses new ones), blackholes (holds every byte, as a
partition does, and delivers them when healed, as TCP's retransmits would), delays, or
half-closes (the client sees end-of-stream, the server does not), then heals.

It runs on its own event loop in a thread; every method may be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from tests.chaos.procs import free_port

MODES = ("pass", "drop", "blackhole", "delay", "half_close")


class Proxy:
    def __init__(self, target_port: int, delay_s: float = 0.5) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.delay_s = delay_s
        self.mode = "pass"
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._client_writers: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")

    def set(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        done = asyncio.run_coroutine_threadsafe(self._set(mode), self._loop)
        done.result(10)

    def heal(self) -> None:
        self.set("pass")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _set(self, mode: str) -> None:
        assert self._flowing is not None
        self.mode = mode
        if mode == "blackhole":
            self._flowing.clear()
            return
        self._flowing.set()
        if mode == "drop":
            for writer in list(self._writers):
                _abort(writer)
        elif mode == "half_close":
            for writer in list(self._client_writers):
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write_eof()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._flowing = asyncio.Event()
        self._flowing.set()
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port, backlog=512)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for writer in list(self._writers):
                _abort(writer)
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "drop":
            _abort(writer)
            return
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _abort(writer)
            return
        self._writers.update((writer, up_writer))
        self._client_writers.add(writer)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            for each in (writer, up_writer):
                self._writers.discard(each)
                _abort(each)
            self._client_writers.discard(writer)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()  # a blackhole holds the bytes until it heals
                if self.mode == "delay":
                    await asyncio.sleep(self.delay_s)
                if writer.is_closing():
                    return
                writer.write(data)
                await writer.drain()
        except (OSError, RuntimeError):
            pass
        finally:
            _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, RuntimeError):
        writer.transport.abort()
