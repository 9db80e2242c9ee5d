"""`tidings purge` and `tidings archive`: retention (R1) by hand — what would go, purging it
now, and exporting history (secrets never included) before it goes."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tidings.bootstrap import Runtime
from tidings.cli.app import ConfigOption, DbOption, app, console, fail, with_runtime


@app.command("purge")
def purge(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would go")] = False,
    retention_days: Annotated[
        float | None,
        typer.Option(help="Days to keep [default: the retention_days setting]", min=0),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Delete ended deliveries, their attempts and events older than their retention."""

    async def work(rt: Runtime) -> None:
        days = rt.settings.retention_days if retention_days is None else retention_days
        if days <= 0:
            typer.echo("retention is off (retention_days = 0): nothing is purged")
            return
        if dry_run:
            _show(await rt.service.purge_due(days), days)
            return
        purged = await rt.service.purge(days, rt.settings.retention_archive_dir)
        typer.echo(f"purged {purged} rows older than {days:g} days")

    with_runtime(db, config, work)


def _show(due: dict[str, int], days: float) -> None:
    table = Table(title=f"Would purge (older than {days:g} days, or the channel's own)")
    table.add_column("channel")
    table.add_column("rows", justify="right")
    for name, count in sorted(due.items()):
        table.add_row(name, str(count))
    console.print(table)


@app.command("archive")
def archive(
    before: Annotated[datetime, typer.Option(help="Rows created before this (ISO 8601)")],
    out: Annotated[Path, typer.Option(help="The file to write: gzipped JSON Lines")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Export events, deliveries and attempts created before a date (no secrets: channel
    configs are not exported), one JSON document per line: {"type": …, "row": {…}}."""
    if out.exists():
        fail(f"{out} exists; choose another file (an archive is never overwritten)")
    when = before if before.tzinfo else before.replace(tzinfo=UTC)

    async def work(rt: Runtime) -> int:
        written = 0
        with gzip.open(out, "wt", encoding="utf-8") as file:
            async for name, page in rt.service.export_rows(when):
                for row in page:
                    file.write(json.dumps({"type": name, "row": row}, ensure_ascii=False))
                    file.write("\n")
                written += len(page)
                typer.echo(f"{name}: {written} rows so far", err=True)
        return written

    try:
        written = with_runtime(db, config, work)
    except OSError as error:
        fail(f"cannot write {out}: {error.strerror}")
    typer.echo(f"wrote {written} rows to {out}")
