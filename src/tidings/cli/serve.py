"""`tidings serve`: API, admin UI and dispatcher in one process — the embedded default.

It listens first: a port already taken is a one-line error before anything is created (no
database, no first-start token, no inbox). Then it migrates, and creates those on a first start.

The web stack (uvicorn, FastAPI, the API and the admin UI) is imported when `serve` runs: it
is most of what every other command would otherwise load before doing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from tidings import heap
from tidings.bootstrap import runtime
from tidings.cli.app import ConfigOption, DbOption, app, fail, run_async, verbose
from tidings.config import Settings, load

if TYPE_CHECKING:
    import uvicorn


def _server(config: uvicorn.Config) -> uvicorn.Server:
    """uvicorn without its own signal handling: ours stops the API and the dispatcher together,
    and exits 0 (uvicorn would re-raise the signal after shutting down)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)


@app.command()
def serve(
    db: DbOption = None,
    config: ConfigOption = None,
    host: Annotated[
        str | None,
        typer.Option(help="Listen address \\[env: TIDINGS_HOST] \\[default: 127.0.0.1]"),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Listen port \\[env: TIDINGS_PORT] \\[default: 8080]")
    ] = None,
    dispatch: Annotated[
        bool,
        typer.Option(
            "--dispatch/--no-dispatch",
            help="Also run a dispatcher (off: API only, for separate or remote workers)",
        ),
    ] = True,
) -> None:
    """Run the API and a dispatcher in one process (migrates the database on start)."""
    settings = load(config, db=db, host=host, port=port)
    verbose()
    with listening(settings.host, settings.port) as sock:
        run_async(lambda: _serve(settings, sock, dispatch))


@contextlib.contextmanager
def listening(host: str, port: int) -> Iterator[socket.socket]:
    """The server's socket, bound and listening, closed at the end."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror or error}")
    with sock:
        yield sock


async def _serve(settings: Settings, sock: socket.socket, dispatch: bool = True) -> None:
    import uvicorn

    from tidings.server import create_app

    async with runtime(settings, migrate=True, wait=True) as rt:
        await rt.service.check_lease()
        token = await rt.service.bootstrap()
        if token is not None:
            print(
                "First start: created an admin API token and an 'inbox' channel.\n"
                "Keep this token, it is not shown again:\n" + token,
                flush=True,
            )
        server = _server(
            uvicorn.Config(
                create_app(rt.service),
                host=settings.host,
                port=settings.port,
                lifespan="off",
                log_level="info",
                access_log=False,
            )
        )
        dispatcher = rt.dispatcher()
        await rt.service.warm()
        heap.settle()

        def stop() -> None:
            server.should_exit = True
            dispatcher.stop()

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop)
        tasks = [asyncio.create_task(server.serve(sockets=[sock]))]
        if dispatch:
            tasks.append(asyncio.create_task(dispatcher.run()))
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        stop()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        if not server.started and done:
            raise SystemExit(1)  # uvicorn said why
