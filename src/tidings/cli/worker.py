"""`tidings worker`: a dispatcher without the API, or with --remote a worker that leases work
from a server over HTTP and needs no database (W4)."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Annotated

import typer

from tidings import heap
from tidings.bootstrap import remote_worker, runtime
from tidings.cli.app import ConfigOption, DbOption, app, fail, run_async, verbose
from tidings.config import Settings, load


@app.command()
def worker(
    db: DbOption = None,
    config: ConfigOption = None,
    concurrency: Annotated[
        int | None,
        typer.Option(help="Sends in flight at once \\[env: TIDINGS_CONCURRENCY] \\[default: 50]"),
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="Worker id written in attempt rows \\[env: TIDINGS_WORKER_ID] "
            "\\[default: hostname:pid]",
        ),
    ] = None,
    lease_s: Annotated[
        float | None,
        typer.Option(
            "--lease-s",
            help="Lease length in seconds \\[env: TIDINGS_LEASE_S] \\[default: 120]",
        ),
    ] = None,
    poll_interval_s: Annotated[
        float | None,
        typer.Option(
            "--poll-interval-s",
            help="Polling fallback in seconds \\[env: TIDINGS_POLL_INTERVAL_S] \\[default: 1]",
        ),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="URL",
            help="Lease work from this tidings server over HTTP instead \\[default: none]",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="A worker token of that server, for --remote "
            "\\[env: TIDINGS_TOKEN] \\[default: none]",
        ),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind", help="With --remote: only these channel kinds \\[default: every kind]"
        ),
    ] = None,
    tenant: Annotated[
        list[str] | None,
        typer.Option("--tenant", help="With --remote: only these tenants \\[default: all]"),
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
    if not token:
        fail(
            "--remote needs --token (or TIDINGS_TOKEN): a worker token of that server "
            "(tidings token create --scope worker)"
        )
    verbose()
    leaser = remote_worker(settings, server, token, kinds, tenants)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, leaser.stop)
        await leaser.run()

    run_async(run)


def run_dispatcher(settings: Settings) -> None:
    verbose()

    async def run() -> None:
        async with runtime(settings, migrate=True, wait=True) as rt:
            dispatcher = rt.dispatcher()
            heap.settle()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, dispatcher.stop)
            await dispatcher.run()

    run_async(run)
