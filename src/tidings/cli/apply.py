"""`tidings apply -f channels.toml` makes the stored channels match a file (with --prune,
disabling those it leaves out; --dry-run only shows the plan); `tidings export` writes the
stored channels in that format, secrets masked unless --with-secrets."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tidings.bootstrap import Runtime
from tidings.cli.app import ConfigOption, DbOption, app, console, fail, warn, with_runtime
from tidings.service import Action, Plan
from tidings.textfile import Unreadable, read_text

#: How a plan's actions are coloured in its table.
STYLES = {
    Action.CREATE: "green",
    Action.UPDATE: "yellow",
    Action.UNCHANGED: "dim",
    Action.PRUNE: "red",
}


@app.command("apply")
def apply_file(
    file: Annotated[
        Path,
        typer.Option("--file", "-f", metavar="FILE", help="The channels file (TOML); - for stdin"),
    ],
    prune: Annotated[
        bool, typer.Option("--prune", help="Disable stored channels the file leaves out")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show the plan; change nothing")
    ] = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Make the stored channels match a channels file: create, update, and with --prune
    disable the rest. Secrets may be "${ENV_VAR}" or "@file". A bad file changes nothing."""
    text, path = _read(file)

    async def work(rt: Runtime) -> tuple[Plan, list[str]]:
        plan = await rt.service.plan_channels(text, path, os.environ, prune=prune)
        if not dry_run and plan.changes_anything:
            await rt.service.apply_channels(plan)
        warnings = [
            f"channel {step.name!r}: {warning}"
            for step in plan.steps
            if step.spec is not None
            for warning in await rt.service.channel_warnings(step.spec)
        ]
        return plan, warnings

    plan, warnings = with_runtime(db, config, work)
    show(plan)
    for warning in warnings:
        warn(warning)
    counts = ", ".join(f"{plan.count(a)} {a.value}" for a in Action)
    verb = "would apply" if dry_run else ("applied" if plan.changes_anything else "nothing to do")
    typer.echo(f"{verb}: {counts}")


@app.command("export")
def export(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write to this file \\[default: stdout]"
        ),
    ] = None,
    with_secrets: Annotated[
        bool,
        typer.Option(
            "--with-secrets",
            help="Write secrets in clear (a file is then readable by its owner only)",
        ),
    ] = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Write the stored channels as a channels file for `tidings apply` (secrets masked:
    applying it keeps the stored ones)."""
    text = with_runtime(
        db, config, lambda rt: rt.service.export_channels(with_secrets=with_secrets)
    )
    if output is None:
        sys.stdout.write(text)
        return
    try:
        fd = os.open(
            output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if with_secrets else 0o644
        )
        with os.fdopen(fd, "w") as out:
            out.write(text)
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror}")


def show(plan: Plan) -> None:
    table = Table("action", "channel", "kind", "changes")
    for step in plan.steps:
        changes = "\n".join(f"{c.field}: {c.old} → {c.new}" for c in step.changes)
        style = STYLES[step.action]
        table.add_row(f"[{style}]{step.action.value}[/]", step.name, step.kind, changes)
    console.print(table)


def _read(file: Path) -> tuple[str, str]:
    if str(file) == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return read_text(file), str(file)
    except Unreadable as why:
        fail(f"cannot read {file}: {why}")
