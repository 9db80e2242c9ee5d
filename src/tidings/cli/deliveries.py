"""`tidings deliveries`: history (M2) and one delivery with its attempts, as tables or JSON,
and resend (M1)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tidings import views
from tidings.cli.app import (
    ConfigOption,
    DbOption,
    JsonFlag,
    app,
    console,
    fail,
    print_json,
    with_runtime,
)
from tidings.core.model import DeliveryQuery
from tidings.core.states import State

deliveries_app = typer.Typer(help="Delivery history and resend.", no_args_is_help=True)
app.add_typer(deliveries_app, name="deliveries")
SHOWN_FIELDS = (
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
)


@deliveries_app.command("list")
def deliveries_list(
    channel_id: Annotated[
        int | None, typer.Option("--channel-id", help="Only this channel's \\[default: all]")
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(help="Only pending, sending, sent, failed or skipped \\[default: all]"),
    ] = None,
    event_kind: Annotated[
        str | None, typer.Option("--event-kind", help="Only events of this kind \\[default: all]")
    ] = None,
    page: Annotated[int, typer.Option(help="Page number, from 1")] = 1,
    page_size: Annotated[int, typer.Option("--page-size", help="Rows per page, 1 to 200")] = 50,
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
    result = with_runtime(db, config, lambda rt: rt.service.deliveries(query, page, page_size))
    if as_json:
        print_json(views.delivery_page(result))
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
    detail = with_runtime(db, config, lambda rt: rt.service.delivery(delivery_id))
    shown = views.delivery_detail(detail)
    if as_json:
        print_json(shown)
        return
    for key in SHOWN_FIELDS:
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
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            help="Resending with the same id requeues once \\[default: a new id]",
        ),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Requeue a failed or skipped delivery."""
    result = with_runtime(
        db, config, lambda rt: rt.service.resend(delivery_id, operator, request_id)
    )
    if result.requeued:
        typer.echo(f"delivery {delivery_id} requeued")
    else:
        typer.echo(f"delivery {delivery_id} was already requeued by this request id")
