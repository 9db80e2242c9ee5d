"""`tidings channel`: add, list, enable, disable, test, and the kinds a channel may have
(generated from the adapters' declarations)."""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from tidings import views
from tidings.bootstrap import Runtime, default_registry
from tidings.cli.app import (
    ConfigOption,
    DbOption,
    JsonFlag,
    app,
    console,
    fail,
    json_object,
    print_json,
    warn,
    with_runtime,
)
from tidings.core.kinds import KindSpec
from tidings.core.outcome import Delivered, attempt_status

channel_app = typer.Typer(
    help="Channels: add, list, test, enable, disable, kinds.", no_args_is_help=True
)
app.add_typer(channel_app, name="channel")
ChannelRef = Annotated[str, typer.Argument(help="Channel id or name", show_default=False)]


@channel_app.command("add")
def channel_add(
    name: Annotated[str, typer.Option("--name", help="A unique name")],
    kind: Annotated[str, typer.Option("--kind", help="See `tidings channel kinds`")],
    adapter_config: Annotated[
        str | None,
        typer.Option(
            "--adapter-config",
            metavar="JSON",
            help="The kind's own settings as a JSON object, e.g. "
            '\'{"url": "https://…"}\' (see `tidings channel kinds`), or @FILE, or - for '
            "standard input (keeps secrets off the command line) \\[default: {}]",
        ),
    ] = None,
    config_json: Annotated[
        str | None, typer.Option("--config-json", hidden=True, help="Old name of --adapter-config")
    ] = None,
    mode: Annotated[str, typer.Option(help="realtime or digest")] = "realtime",
    digest_period_s: Annotated[
        float | None,
        typer.Option(
            "--digest-period-s", help="Seconds between digests (digest mode) \\[default: 3600]"
        ),
    ] = None,
    filter_json: Annotated[
        str | None,
        typer.Option(
            "--filter-json",
            metavar="JSON",
            help='Which events, e.g. \'{"kinds": ["monitor.*"], "min_severity": "high"}\' '
            "\\[default: every event]",
        ),
    ] = None,
    rate_per_min: Annotated[
        float | None,
        typer.Option(
            "--rate-per-min", help="Messages per minute, 0 unlimited \\[default: the kind's own]"
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(help="Receive only this tenant's events \\[default: every tenant's]"),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a channel (checked like every other path: kind, config, rate, timeout)."""
    if adapter_config is not None and config_json is not None:
        fail("give --adapter-config only (--config-json is its old name)")
    settings_json = adapter_config if adapter_config is not None else config_json
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "config": json_object(
            settings_json, "--adapter-config" if config_json is None else "--config-json"
        ),
        "mode": mode,
        "filter": json_object(filter_json, "--filter-json"),
    }
    extra = {"digest_period_s": digest_period_s, "rate_per_min": rate_per_min, "tenant": tenant}
    fields |= {k: v for k, v in extra.items() if v is not None}

    async def work(rt: Runtime) -> tuple[dict[str, Any], list[str]]:
        channel = await rt.service.create_channel(fields)
        return rt.service.channel_json(channel), await rt.service.channel_warnings(channel)

    shown, warnings = with_runtime(db, config, work)
    if as_json:
        print_json(shown)
    else:
        typer.echo(
            f"channel #{shown['id']} {shown['name']} ({shown['kind']}, {shown['mode']}) added"
        )
    for warning in warnings:
        warn(warning)


@channel_app.command("list")
def channel_list(
    db: DbOption = None, config: ConfigOption = None, as_json: JsonFlag = False
) -> None:
    """List channels (secrets redacted)."""

    async def work(rt: Runtime) -> list[dict[str, Any]]:
        return [rt.service.channel_json(c) for c in await rt.service.channels()]

    shown = with_runtime(db, config, work)
    if as_json:
        print_json(shown)
        return
    table = Table("id", "name", "kind", "mode", "enabled", "rate/min", "filter")
    for c in shown:
        table.add_row(
            str(c["id"]),
            c["name"],
            c["kind"],
            c["mode"],
            "yes" if c["enabled"] else "no",
            f"{c['rate_per_min']:g}",
            json.dumps(c["filter"]),
        )
    console.print(table)


@channel_app.command("enable")
def channel_enable(channel: ChannelRef, db: DbOption = None, config: ConfigOption = None) -> None:
    """Enable a channel (skipped deliveries stay skipped; resend them to revive)."""

    async def work(rt: Runtime) -> str:
        found = await rt.service.channel_by_ref(channel)
        return (await rt.service.enable_channel(found.id)).name

    typer.echo(f"channel {with_runtime(db, config, work)} enabled")


@channel_app.command("disable")
def channel_disable(channel: ChannelRef, db: DbOption = None, config: ConfigOption = None) -> None:
    """Disable a channel; its pending deliveries become skipped."""

    async def work(rt: Runtime) -> int:
        found = await rt.service.channel_by_ref(channel)
        return await rt.service.disable_channel(found.id, "disabled from the CLI")

    skipped = with_runtime(db, config, work)
    typer.echo(f"channel {channel} disabled; {skipped} pending deliveries skipped")


@channel_app.command("test")
def channel_test(channel: ChannelRef, db: DbOption = None, config: ConfigOption = None) -> None:
    """Send a test message now and print the classified outcome."""

    async def work(rt: Runtime) -> tuple[str, str | None]:
        outcome = await rt.service.test_channel((await rt.service.channel_by_ref(channel)).id)
        error = None if isinstance(outcome, Delivered) else outcome.error
        return attempt_status(outcome).value, error

    status, error = with_runtime(db, config, work)
    typer.echo(status if error is None else f"{status}: {error}")
    if status != "delivered":
        raise typer.Exit(1)


@channel_app.command("rotate-secret")
def channel_rotate_secret(
    channel: ChannelRef,
    grace_s: Annotated[
        float, typer.Option("--grace-s", help="How long the old secret keeps signing")
    ] = 86400.0,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """A new signing secret, printed once (alone on the last line); the old one signs beside
    it for --grace-s seconds (24 h by default)."""

    async def work(rt: Runtime) -> tuple[str, str]:
        found = await rt.service.channel_by_ref(channel)
        rotated = await rt.service.rotate_signing_secret(found.id, grace_s)
        until = rotated.previous_until
        return rotated.secret, (f"until {until:%Y-%m-%d %H:%M:%S} UTC" if until else "no more")

    secret, until = with_runtime(db, config, work)
    typer.echo(f"channel {channel}: new signing secret; the old one signs {until}:")
    typer.echo(secret)


@channel_app.command("kinds")
def channel_kinds(as_json: JsonFlag = False) -> None:
    """The channel kinds: size limit, default rate, markup and config fields of each."""
    specs = views.kind_specs(default_registry())
    if as_json:
        print_json(views.kinds(specs))
        return
    rows = [
        (spec.kind, _limit(spec), f"{spec.default_rate_per_min:g}", spec.flavour, _fields(spec))
        for spec in specs
    ]
    widest = max((len(line) for row in rows for line in row[4].splitlines()), default=4)
    table = Table(
        Column("kind", no_wrap=True),
        Column("size limit", no_wrap=True),
        Column("rate/min", justify="right", no_wrap=True),
        Column("markup", overflow="fold"),
        Column("config fields", min_width=widest, no_wrap=True),  # names are never cut
    )
    for row in rows:
        table.add_row(*row)
    console.print(table)
    typer.echo("* required; (secret): write-only, read back masked. --json has each field's type.")
    typer.echo("\nExamples (made-up values):")
    for spec in specs:
        typer.echo("  " + example_command(spec))


def example_command(spec: KindSpec) -> str:
    """A `tidings channel add` line for the kind, with its declared example config."""
    line = f"tidings channel add --name my-{spec.kind} --kind {spec.kind}"
    if spec.example:
        line += f" --adapter-config {shlex.quote(json.dumps(dict(spec.example)))}"
    return line


def _limit(spec: KindSpec) -> str:
    limit = spec.limit
    return "none" if limit is None else f"{limit.amount} {limit.unit.value.replace('_', ' ')}"


def _fields(spec: KindSpec) -> str:
    marks = [
        f.name + ("*" if f.required else "") + (" (secret)" if f.secret else "")
        for f in spec.fields
    ]
    return "\n".join(marks) or "none"
