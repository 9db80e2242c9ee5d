"""Typer application: every command takes --db (or TIDINGS_DB) and --config (TIDINGS_CONFIG);
the options, output helpers and runner the command modules share, and `tidings db`.

Errors from tidings (bad input, bad configuration, an unreachable database) print one line on
stderr and exit non-zero; they never show a traceback. Commands call tidings.service through
tidings.bootstrap's runtime; they never import tidings.api or tidings.web.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from tidings.bootstrap import Runtime, runtime, upgrade
from tidings.config import load
from tidings.core.errors import TidingsError

T = TypeVar("T")

app = typer.Typer(
    name="tidings",
    help="Durable notification delivery: events to chat bots, email and webhooks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL, e.g. sqlite:///./tidings.db or postgresql://u@h/db [env: TIDINGS_DB]",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    str | None,
    typer.Option("--config", help="TOML settings file [env: TIDINGS_CONFIG]", show_default=False),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
console = Console()


class Failed(Exception):
    """A one-line failure to report and exit with."""


def fail(message: str) -> NoReturn:
    raise Failed(message)


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None, config: ConfigOption = None) -> None:
    """Apply the database migrations (serve and worker also do this on start)."""
    settings = load(config, db=db)
    run_async(lambda: upgrade(settings))
    typer.echo(f"database {settings.db} is up to date")


def verbose() -> None:
    """Long-running commands (serve, worker) log what they do; one-shot commands stay quiet."""
    logging.getLogger("tidings").setLevel(logging.INFO)


def with_runtime(db: str | None, config: str | None, work: Callable[[Runtime], Awaitable[T]]) -> T:
    """Run `work` against a runtime over the database the options name; its answer."""
    settings = load(config, db=db)
    box: list[T] = []

    async def run() -> None:
        async with runtime(settings) as rt:
            box.append(await work(rt))

    run_async(run)
    return box[0]


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def json_object(text: str | None, what: str) -> dict[str, Any]:
    """A JSON object given on the command line, or read from a file (`@path`) or standard
    input (`-`), so secrets need not be on the command line (ps, shell history); {} when
    absent."""
    if text is None:
        return {}
    text = _read_argument(text, what)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        fail(f"{what} is not valid JSON: {error.msg} (line {error.lineno})")
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object")
    found: dict[str, Any] = value
    return found


def _read_argument(text: str, what: str) -> str:
    if text == "-":
        return sys.stdin.read()
    if not text.startswith("@"):
        return text
    try:
        with open(text[1:], encoding="utf-8") as given:
            return given.read()
    except (OSError, UnicodeDecodeError) as error:
        fail(f"{what}: cannot read {text[1:]}: {getattr(error, 'strerror', None) or error}")


def run_async(run: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is absent on some platforms
        asyncio.run(run())
        return
    uvloop.run(run())


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        app(args=argv, prog_name="tidings")
    except SystemExit as exit_:  # usage errors are printed by Typer and exit 2
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except (TidingsError, Failed) as error:
        print(f"tidings: {error}", file=sys.stderr)
        return 1
    return 0
