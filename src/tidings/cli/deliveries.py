"""`tidings deliveries`: history (M2) and one delivery with its attempts, as tables or JSON,
and resend: one (M1) or all a filter matches (M3)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
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
from tidings.core.model import DeliveryQuery, ReplayQuery
from tidings.core.states import Failure, State
from tidings.service import Service

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
    cursor: Annotated[
        str | None,
        typer.Option(
            help="The page a cursor printed by an earlier list leads to, instead of --page "
            "\\[default: none]"
        ),
    ] = None,
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
    result = with_runtime(
        db, config, lambda rt: rt.service.deliveries(query, page, page_size, cursor)
    )
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
    pages = max(result.page, -(-result.total // result.page_size))
    about = "about " if result.total_is_estimate else ""
    typer.echo(f"page {result.page} of {about}{pages}, {about}{result.total} in all")
    if result.next_cursor:
        typer.echo(f"older: --cursor {result.next_cursor}")
    if result.prev_cursor:
        typer.echo(f"newer: --cursor {result.prev_cursor}")


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
    delivery_id: Annotated[int | None, typer.Argument(help="One delivery (M1)")] = None,
    state: Annotated[
        list[str] | None,
        typer.Option(help="failed or skipped (repeatable) \\[default: failed]"),
    ] = None,
    channel_id: Annotated[
        int | None, typer.Option("--channel-id", help="Only this channel \\[default: any]")
    ] = None,
    failure: Annotated[
        str | None,
        typer.Option(help="permanent, exhausted or expired \\[default: any]"),
    ] = None,
    event_kind: Annotated[
        str | None, typer.Option("--event-kind", help="Only this event kind \\[default: any]")
    ] = None,
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant's deliveries \\[default: any]")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(help="Created at or after (ISO 8601) \\[default: no bound]"),
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(help="Created at or before (ISO 8601) \\[default: no bound]"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count the matches")] = False,
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
    """Requeue one failed or skipped delivery, or every one a filter matches (M3: 10,000 a
    page, each audited; --dry-run counts them first)."""
    filtered = any(
        x is not None for x in (state, channel_id, failure, event_kind, tenant, since, until)
    )
    if delivery_id is not None:
        if filtered or dry_run:
            fail("give a delivery id, or filters (with --dry-run if you like), not both")
        _resend_one(delivery_id, operator, request_id, db, config)
        return
    if not filtered:
        fail("give a delivery id, or at least one filter (e.g. --state failed --since …)")
    query = _replay_query(state, channel_id, failure, event_kind, tenant, since, until)
    with_runtime(db, config, lambda rt: _replay(rt.service, query, operator, request_id, dry_run))


def _resend_one(
    delivery_id: int, operator: str, request_id: str | None, db: str | None, config: str | None
) -> None:
    result = with_runtime(
        db, config, lambda rt: rt.service.resend(delivery_id, operator, request_id)
    )
    if result.requeued:
        typer.echo(f"delivery {delivery_id} requeued")
    else:
        typer.echo(f"delivery {delivery_id} was already requeued by this request id")


def _replay_query(
    states: list[str] | None,
    channel_id: int | None,
    failure: str | None,
    event_kind: str | None,
    tenant: str | None,
    since: datetime | None,
    until: datetime | None,
) -> ReplayQuery:
    wanted = states or ["failed"]
    bad = [s for s in wanted if s not in ("failed", "skipped")]
    if bad:
        fail(f"--state {bad[0]!r}: only failed or skipped deliveries can be resent")
    if failure is not None and failure not in {f.value for f in Failure}:
        fail(f"--failure {failure!r}: use permanent, exhausted or expired")
    return ReplayQuery(
        states=frozenset(State(s) for s in wanted),
        channel_id=channel_id,
        failure=Failure(failure) if failure else None,
        event_kind=event_kind,
        tenant=tenant,
        since=_aware(since),
        until=_aware(until),
    )


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None or value.tzinfo else value.replace(tzinfo=UTC)


async def _replay(
    service: Service, query: ReplayQuery, operator: str, request_id: str | None, dry_run: bool
) -> None:
    """Page after page until nothing more matches, saying how far it got."""
    key = request_id or uuid.uuid4().hex
    if dry_run:
        done = await service.replay(query, operator, None, dry_run=True)
        typer.echo(f"{done.matched} deliveries match; none requeued (dry run)")
        return
    page, requeued = 0, 0
    while True:
        page += 1
        done = await service.replay(query, operator, f"{key}:{page}", dry_run=False)
        requeued += done.requeued
        typer.echo(f"page {page}: {done.requeued} requeued of {done.matched} matching")
        if done.next_after_id is None:
            break
        query = replace(query, after_id=done.next_after_id)
    typer.echo(f"{requeued} deliveries requeued")
