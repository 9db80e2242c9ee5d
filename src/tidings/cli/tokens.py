"""`tidings token`: create (printed once), list and revoke API tokens (S5)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from tidings import views
from tidings.bootstrap import Runtime
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
from tidings.core.duration import parse_duration

token_app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)
app.add_typer(token_app, name="token")


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option("--name", help="Who or what uses the token")],
    scope: Annotated[
        list[str],
        typer.Option("--scope", help="publish, read, admin (repeatable), or worker alone"),
    ],
    expires_in: Annotated[
        str | None,
        typer.Option(
            "--expires-in", help="Stop working after e.g. 90s, 12h, 30d, 2w \\[default: never]"
        ),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind", help="worker: a kind it may ever lease (repeatable) \\[default: any]"
        ),
    ] = None,
    tenant: Annotated[
        list[str] | None,
        typer.Option(
            "--tenant", help="worker: a tenant it may ever lease (repeatable) \\[default: any]"
        ),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Create an API token and print it once (alone on the last line)."""
    expires_in_s = None
    if expires_in is not None:
        try:
            expires_in_s = parse_duration(expires_in)
        except ValueError as error:
            fail(f"--expires-in: {error}")

    async def work(rt: Runtime) -> tuple[str, dict[str, Any]]:
        token, info = await rt.service.create_token(
            name, scope, expires_in_s=expires_in_s, kinds=kind or None, tenants=tenant or None
        )
        return token, views.token(info)

    token, shown = with_runtime(db, config, work)
    until = f", expires {shown['expires_at']}" if shown["expires_at"] else ""
    typer.echo(
        f"token #{shown['id']} {shown['name']!r} with scopes {', '.join(shown['scopes'])}"
        f"{until}; it is shown only now:"
    )
    typer.echo(token)


@token_app.command("list")
def token_list(db: DbOption = None, config: ConfigOption = None, as_json: JsonFlag = False) -> None:
    """List tokens: names, scopes, state, last use and expiry (never the tokens themselves)."""

    async def work(rt: Runtime) -> list[dict[str, Any]]:
        return [views.token(t) for t in await rt.service.access.tokens()]

    shown = with_runtime(db, config, work)
    if as_json:
        print_json(shown)
        return
    table = Table("id", "name", "scopes", "state", "created", "last used", "expires", "ceiling")
    for t in shown:
        table.add_row(
            str(t["id"]),
            t["name"],
            ", ".join(t["scopes"]),
            t["state"],
            t["created_at"],
            t["last_used_at"] or "never",
            t["expires_at"] or "never",
            _ceiling(t),
        )
    console.print(table)


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(help="The token's id (see `tidings token list`)")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Revoke a token at once; admin UI sessions opened with it end too."""

    async def work(rt: Runtime) -> dict[str, Any]:
        return views.token(await rt.service.access.revoke_token(token_id))

    shown = with_runtime(db, config, work)
    typer.echo(f"token #{shown['id']} {shown['name']!r} revoked at {shown['revoked_at']}")


def _ceiling(t: dict[str, Any]) -> str:
    parts = [
        f"{label}: {', '.join(t[key])}"
        for key, label in (("kinds", "kinds"), ("tenants", "tenants"))
        if t[key] is not None
    ]
    return "; ".join(parts)
