"""Management commands: tokens, channels, publishing and delivery history.

Tables for people, `--json` for scripts; every command opens the database directly.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from tidings.api import serialize
from tidings.bootstrap import Runtime, runtime
from tidings.cli.app import ConfigOption, DbOption, app, fail, run_async
from tidings.config import load
from tidings.core.model import DeliveryQuery
from tidings.core.outcome import Delivered, attempt_status
from tidings.core.states import State

T = TypeVar("T")
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]

token_app = typer.Typer(help="API tokens.", no_args_is_help=True)
channel_app = typer.Typer(
    help="Channels: add, list, test, enable, disable, kinds.", no_args_is_help=True
)
deliveries_app = typer.Typer(help="Delivery history and resend.", no_args_is_help=True)
app.add_typer(token_app, name="token")
app.add_typer(channel_app, name="channel")
app.add_typer(deliveries_app, name="deliveries")
console = Console()


def _with_runtime(db: str | None, config: str | None, work: Callable[[Runtime], Awaitable[T]]) -> T:
    settings = load(config, db=db)
    box: list[T] = []

    async def run() -> None:
        async with runtime(settings) as rt:
            box.append(await work(rt))

    run_async(run)
    return box[0]


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option("--name", help="Who or what uses the token")],
    scope: Annotated[
        list[str], typer.Option("--scope", help="publish, read or admin (repeatable)")
    ],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Create an API token and print it once (alone on the last line)."""
    token, info = _with_runtime(db, config, lambda rt: rt.service.create_token(name, scope))
    typer.echo(f"token {info.name!r} with scopes {', '.join(info.scopes)}; it is shown only now:")
    typer.echo(token)


def _json_object(text: str | None, what: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        fail(f"{what} is not valid JSON: {error.msg} (line {error.lineno})")
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object")
    found: dict[str, Any] = value
    return found


@channel_app.command("add")
def channel_add(
    name: Annotated[str, typer.Option("--name")],
    kind: Annotated[str, typer.Option("--kind", help="See `tidings channel kinds`")],
    config_json: Annotated[
        str | None, typer.Option("--config-json", help='Adapter settings, e.g. \'{"url": "…"}\'')
    ] = None,
    mode: Annotated[str, typer.Option(help="realtime or digest")] = "realtime",
    digest_period_s: Annotated[float | None, typer.Option("--digest-period-s")] = None,
    filter_json: Annotated[str | None, typer.Option("--filter-json")] = None,
    rate_per_min: Annotated[float | None, typer.Option("--rate-per-min")] = None,
    tenant: Annotated[str | None, typer.Option()] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a channel."""
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "config": _json_object(config_json, "--config-json"),
        "mode": mode,
        "filter": _json_object(filter_json, "--filter-json"),
    }
    extra = {"digest_period_s": digest_period_s, "rate_per_min": rate_per_min, "tenant": tenant}
    fields |= {k: v for k, v in extra.items() if v is not None}

    async def work(rt: Runtime) -> dict[str, Any]:
        return rt.service.channel_json(await rt.service.create_channel(fields))

    shown = _with_runtime(db, config, work)
    if as_json:
        _print_json(shown)
    else:
        typer.echo(
            f"channel #{shown['id']} {shown['name']} ({shown['kind']}, {shown['mode']}) added"
        )


@channel_app.command("list")
def channel_list(
    db: DbOption = None, config: ConfigOption = None, as_json: JsonFlag = False
) -> None:
    """List channels (secrets redacted)."""

    async def work(rt: Runtime) -> list[dict[str, Any]]:
        return [rt.service.channel_json(c) for c in await rt.hub.channels.list()]

    shown = _with_runtime(db, config, work)
    if as_json:
        _print_json(shown)
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


def _channel_id(rt: Runtime, ref: str) -> Awaitable[int]:
    async def find() -> int:
        if ref.isdigit():
            return (await rt.hub.channels.get(int(ref))).id
        return (await rt.hub.channels.get_by_name(ref)).id

    return find()


@channel_app.command("enable")
def channel_enable(
    channel: Annotated[str, typer.Argument(help="Channel id or name")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Enable a channel (skipped deliveries stay skipped; resend them to revive)."""

    async def work(rt: Runtime) -> str:
        return (await rt.hub.channels.enable(await _channel_id(rt, channel))).name

    typer.echo(f"channel {_with_runtime(db, config, work)} enabled")


@channel_app.command("disable")
def channel_disable(
    channel: Annotated[str, typer.Argument(help="Channel id or name")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Disable a channel; its pending deliveries become skipped."""

    async def work(rt: Runtime) -> int:
        return await rt.hub.channels.disable(
            await _channel_id(rt, channel), "disabled from the CLI"
        )

    skipped = _with_runtime(db, config, work)
    typer.echo(f"channel {channel} disabled; {skipped} pending deliveries skipped")


@channel_app.command("test")
def channel_test(
    channel: Annotated[str, typer.Argument(help="Channel id or name")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Send a test message now and print the classified outcome."""

    async def work(rt: Runtime) -> tuple[str, str | None]:
        outcome = await rt.service.test_channel(await _channel_id(rt, channel))
        error = None if isinstance(outcome, Delivered) else outcome.error
        return attempt_status(outcome).value, error

    status, error = _with_runtime(db, config, work)
    typer.echo(status if error is None else f"{status}: {error}")
    if status != "delivered":
        raise typer.Exit(1)


@channel_app.command("kinds")
def channel_kinds(as_json: JsonFlag = False) -> None:
    """List the channel kinds with their limits and default rate."""
    from tidings.channels.registry import Registry

    registry = Registry.default()
    rows = []
    for kind in registry.kinds():
        spec = registry.get(kind).spec
        limit = spec.limit
        rows.append(
            {
                "kind": kind,
                "max_message_size": None if limit is None else limit.amount,
                "size_unit": None if limit is None else limit.unit.value,
                "default_rate_per_min": spec.default_rate_per_min,
                "flavour": spec.flavour,
            }
        )
    if as_json:
        _print_json(rows)
        return
    table = Table("kind", "size limit", "default rate/min", "markup")
    for row in rows:
        size = (
            "none"
            if row["max_message_size"] is None
            else f"{row['max_message_size']} {row['size_unit']}"
        )
        table.add_row(
            str(row["kind"]), size, f"{row['default_rate_per_min']:g}", str(row["flavour"])
        )
    console.print(table)


@app.command()
def publish(
    kind: Annotated[str | None, typer.Option("--kind")] = None,
    subject: Annotated[str | None, typer.Option("--subject")] = None,
    severity: Annotated[str, typer.Option()] = "info",
    title: Annotated[str, typer.Option()] = "",
    body: Annotated[str, typer.Option()] = "",
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key")] = None,
    json_file: Annotated[
        Path | None,
        typer.Option("--json", help="Read the event (all fields) from a JSON file; - for stdin"),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Publish an event from a shell."""
    fields: dict[str, Any] = {}
    if json_file is not None:
        text = sys.stdin.read() if str(json_file) == "-" else _read(json_file)
        fields = _json_object(text, str(json_file))
    given = {"kind": kind, "subject": subject, "idempotency_key": idempotency_key}
    fields |= {k: v for k, v in given.items() if v is not None}
    fields.setdefault("severity", severity)
    fields.setdefault("title", title)
    fields.setdefault("body", body)
    if "kind" not in fields or "subject" not in fields:
        fail("--kind and --subject are required (or give them in --json)")
    result = _with_runtime(db, config, lambda rt: rt.service.publish(fields))
    verb = "published" if result.created else "already published (same idempotency key)"
    typer.echo(f"event #{result.event.id} {verb}; {len(result.deliveries)} deliveries")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror}")
        raise  # unreachable: fail raises


@deliveries_app.command("list")
def deliveries_list(
    channel_id: Annotated[int | None, typer.Option("--channel-id")] = None,
    state: Annotated[
        str | None, typer.Option(help="pending, sending, sent, failed, skipped")
    ] = None,
    event_kind: Annotated[str | None, typer.Option("--event-kind")] = None,
    page: Annotated[int, typer.Option()] = 1,
    page_size: Annotated[int, typer.Option("--page-size")] = 50,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Delivery history, newest first."""
    if state is not None and state not in {s.value for s in State}:
        fail(f"unknown state {state!r}: use pending, sending, sent, failed or skipped")
    query = DeliveryQuery(
        channel_id=channel_id, state=State(state) if state else None, event_kind=event_kind
    )
    result = _with_runtime(db, config, lambda rt: rt.service.deliveries(query, page, page_size))
    if as_json:
        _print_json(
            {
                "items": [serialize.delivery_view(v) for v in result.items],
                "total": result.total,
                "page": result.page,
                "page_size": result.page_size,
            }
        )
        return
    table = Table("id", "channel", "event", "subject", "state", "attempts", "last error")
    for v in result.items:
        d = v.delivery
        table.add_row(
            str(d.id),
            v.channel_name,
            v.event_kind,
            v.subject,
            d.state.value,
            str(d.attempts),
            (d.last_error or "")[:60],
        )
    console.print(table)
    pages = max(1, -(-result.total // result.page_size))
    typer.echo(f"page {result.page} of {pages}, {result.total} in all")


@deliveries_app.command("show")
def deliveries_show(
    delivery_id: Annotated[int, typer.Argument()],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonFlag = False,
) -> None:
    """One delivery with its attempts."""
    detail = _with_runtime(db, config, lambda rt: rt.service.delivery(delivery_id))
    shown = serialize.delivery_detail(detail)
    if as_json:
        _print_json(shown)
        return
    for key in (
        "id",
        "channel_name",
        "event_kind",
        "subject",
        "title",
        "state",
        "attempts",
        "failure",
        "skip_reason",
        "last_error",
        "created_at",
        "sent_at",
    ):
        typer.echo(f"{key:>14}: {shown[key]}")
    table = Table("attempt", "worker", "status", "ms", "error", "started")
    for a in shown["attempts_log"]:
        table.add_row(
            str(a["id"]),
            a["worker_id"],
            a["status"],
            str(a["duration_ms"]),
            (a["error"] or "")[:60],
            a["started_at"],
        )
    console.print(table)


@deliveries_app.command("resend")
def deliveries_resend(
    delivery_id: Annotated[int, typer.Argument()],
    operator: Annotated[str, typer.Option(help="Who resends, for the audit row")] = "cli",
    request_id: Annotated[str | None, typer.Option("--request-id")] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Requeue a failed or skipped delivery."""
    result = _with_runtime(
        db, config, lambda rt: rt.service.resend(delivery_id, operator, request_id)
    )
    if result.requeued:
        typer.echo(f"delivery {delivery_id} requeued")
    else:
        typer.echo(f"delivery {delivery_id} was already requeued by this request id")
