"""`tidings publish`: publish one event from a shell, from flags or a JSON file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tidings.bootstrap import Runtime
from tidings.cli.app import ConfigOption, DbOption, app, fail, json_object, warn, with_runtime
from tidings.core.model import PublishResult
from tidings.textfile import Unreadable, read_text


@app.command()
def publish(
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="What happened, dotted, e.g. monitor.down \\[required]"),
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option("--subject", help="What it is about, e.g. web-1 \\[required]"),
    ] = None,
    severity: Annotated[str, typer.Option(help="info, low, medium, high or critical")] = "info",
    title: Annotated[str, typer.Option(help="One line for people")] = "",
    body: Annotated[str, typer.Option(help="More text for people")] = "",
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            help="Publishing the same key again stores nothing new \\[default: none]",
        ),
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="FILE",
            help="Read the event (all fields) from a JSON file; - for stdin \\[default: none]",
        ),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Publish an event from a shell."""
    fields: dict[str, Any] = {}
    if json_file is not None:
        text = sys.stdin.read() if str(json_file) == "-" else _read(json_file)
        fields = json_object(text, str(json_file))
    given = {"kind": kind, "subject": subject, "idempotency_key": idempotency_key}
    fields |= {k: v for k, v in given.items() if v is not None}
    fields.setdefault("severity", severity)
    fields.setdefault("title", title)
    fields.setdefault("body", body)
    if "kind" not in fields or "subject" not in fields:
        fail("--kind and --subject are required (or give them in --json)")

    async def work(rt: Runtime) -> tuple[PublishResult, int]:
        result = await rt.service.publish(fields)
        checked = len(await rt.service.channel_refs()) if not result.deliveries else 0
        return result, checked

    result, checked = with_runtime(db, config, work)
    verb = "published" if result.created else "already published (same idempotency key)"
    typer.echo(f"event #{result.event.id} {verb}; {len(result.deliveries)} deliveries")
    if not result.deliveries:
        warn(f"no channel matched: {checked} channels checked")


def _read(path: Path) -> str:
    try:
        return read_text(path)
    except Unreadable as why:
        fail(f"cannot read {path}: {why}")
