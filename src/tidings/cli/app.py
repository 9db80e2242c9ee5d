"""Typer application: every command takes --db (or TIDINGS_DB) and --config (TIDINGS_CONFIG).

Errors from tidings (bad input, bad configuration, an unreachable database) print one line on
stderr and exit non-zero; they never show a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import typer

from tidings import heap
from tidings.bootstrap import runtime
from tidings.config import Settings, load
from tidings.core.errors import TidingsError
from tidings.store import Store

app = typer.Typer(
    name="tidings",
    help="Durable notification delivery: events to chat bots, email and webhooks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL, e.g. sqlite:///./tidings.db or postgresql://u@h/db [env: TIDINGS_DB]",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    str | None,
    typer.Option("--config", help="TOML settings file [env: TIDINGS_CONFIG]", show_default=False),
]


class Failed(Exception):
    """A one-line failure to report and exit with."""


def fail(message: str) -> None:
    raise Failed(message)


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None, config: ConfigOption = None) -> None:
    """Apply the database migrations (serve and worker also do this on start)."""
    settings = load(config, db=db)

    async def upgrade() -> None:
        store = Store(settings.db)
        try:
            await store.migrate()
        finally:
            await store.close()

    run_async(upgrade)
    typer.echo(f"database {settings.db} is up to date")


@app.command()
def worker(
    db: DbOption = None,
    config: ConfigOption = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Sends in flight at once [env: TIDINGS_CONCURRENCY]")
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option("--id", help="Worker id written in attempt rows [default: hostname:pid]"),
    ] = None,
    lease_s: Annotated[
        float | None, typer.Option("--lease-s", help="Lease length in seconds [default: 120]")
    ] = None,
    poll_interval_s: Annotated[
        float | None,
        typer.Option("--poll-interval-s", help="Polling fallback in seconds [default: 1]"),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option("--remote", help="Lease work from this tidings server over HTTP instead"),
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", help="Admin token for --remote [env: TIDINGS_TOKEN]")
    ] = None,
    kind: Annotated[
        list[str] | None, typer.Option("--kind", help="With --remote: only these channel kinds")
    ] = None,
    tenant: Annotated[
        list[str] | None, typer.Option("--tenant", help="With --remote: only these tenants")
    ] = None,
) -> None:
    """Run a dispatcher only (no API). Any number may share one PostgreSQL database; with
    --remote, lease work from a server instead and need no database at all."""
    settings = load(
        config,
        db=db,
        concurrency=concurrency,
        worker_id=worker_id,
        lease_s=lease_s,
        poll_interval_s=poll_interval_s,
    )
    if remote is not None:
        run_remote(settings, remote, token or os.environ.get("TIDINGS_TOKEN"), kind, tenant)
        return
    run_dispatcher(settings)


def run_remote(
    settings: Settings,
    server: str,
    token: str | None,
    kinds: list[str] | None,
    tenants: list[str] | None,
) -> None:
    from tidings.channels.netguard import parse_networks
    from tidings.channels.registry import Registry
    from tidings.remote import RemoteWorker

    if not token:
        fail("--remote needs --token (or TIDINGS_TOKEN): an admin token of that server")
    verbose()
    worker = RemoteWorker(
        server,
        token or "",
        Registry.default(),
        worker_id=settings.worker_id,
        kinds=kinds,
        tenants=tenants,
        poll_interval_s=settings.poll_interval_s,
        concurrency=settings.concurrency,
        allowed_networks=parse_networks(settings.allowed_private_networks),
    )

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.stop)
        await worker.run()

    run_async(run)


def verbose() -> None:
    """Long-running commands (serve, worker) log what they do; one-shot commands stay quiet."""
    logging.getLogger("tidings").setLevel(logging.INFO)


def run_dispatcher(settings: Settings) -> None:
    verbose()

    async def run() -> None:
        async with runtime(settings) as rt:
            dispatcher = rt.dispatcher()
            heap.settle()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, dispatcher.stop)
            await dispatcher.run()

    run_async(run)


def run_async(run: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is absent on some platforms
        asyncio.run(run())
        return
    uvloop.run(run())


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        app(args=argv, prog_name="tidings")
    except SystemExit as exit_:  # usage errors are printed by Typer and exit 2
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except (TidingsError, Failed) as error:
        print(f"tidings: {error}", file=sys.stderr)
        return 1
    return 0
