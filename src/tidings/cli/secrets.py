"""`tidings secrets` (also `tidings secret`): fresh signing secrets and secret keys, and the
rotation of the key channel secrets are encrypted under (S4)."""

from __future__ import annotations

from typing import Annotated

import typer

from tidings import service
from tidings.cli.app import ConfigOption, DbOption, app, with_runtime
from tidings.service import Rotation

secrets_app = typer.Typer(
    help="Signing secrets and the key channel secrets are encrypted under.", no_args_is_help=True
)
app.add_typer(secrets_app, name="secrets")
app.add_typer(secrets_app, name="secret", hidden=True)


@secrets_app.command("new")
def secret_new() -> None:
    """Print a fresh webhook signing secret (whsec_…, Standard Webhooks)."""
    typer.echo(service.new_signing_secret())


@secrets_app.command("new-key")
def secret_new_key() -> None:
    """Print a fresh secret key (base64 of 32 random bytes) for TIDINGS_SECRET_KEY."""
    typer.echo(service.new_secret_key())


@secrets_app.command("rotate")
def secrets_rotate(
    finish: Annotated[
        bool, typer.Option("--finish", help="Forget the old keys once every process has the new")
    ] = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Re-encrypt every channel's secrets under a new key, without downtime.

    With a key file: a new key is written first in it, the old ones stay readable, and every
    running process picks the file up at its next secret read or write. With
    TIDINGS_SECRET_KEY: set the new key there and the old one in TIDINGS_SECRET_KEY_OLD first.
    `--finish` then drops the old keys."""
    done: Rotation = with_runtime(
        db, config, lambda rt: rt.service.rotate_secret_key(finish=finish)
    )
    where = f" (key file {done.key_file})" if done.key_file else ""
    typer.echo(f"{done.resealed} channel(s) sealed under key {done.primary}{where}")
    if finish:
        typer.echo("old keys forgotten")
    elif done.others:
        typer.echo(f"old key(s) {', '.join(done.others)} still readable: run again with --finish")
