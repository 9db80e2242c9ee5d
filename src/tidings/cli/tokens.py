"""`tidings token`: API tokens, printed once when created."""

from __future__ import annotations

from typing import Annotated

import typer

from tidings.cli.app import ConfigOption, DbOption, app, with_runtime

token_app = typer.Typer(help="API tokens.", no_args_is_help=True)
app.add_typer(token_app, name="token")


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
    token, info = with_runtime(db, config, lambda rt: rt.service.create_token(name, scope))
    typer.echo(f"token {info.name!r} with scopes {', '.join(info.scopes)}; it is shown only now:")
    typer.echo(token)
