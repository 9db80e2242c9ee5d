"""Typer application: every command takes --db (or TIDINGS_DB) and --config (TIDINGS_CONFIG);
the options, output helpers and runner the command modules share, and `tidings db`.

Every error is one line on stderr and a non-zero exit — bad input, usage, an unreachable or
unmigrated database, a bug — with the traceback only under --debug (or TIDINGS_DEBUG=1).
Commands call tidings.service through tidings.bootstrap's runtime; they never import
tidings.api or tidings.web. Only `serve`, `worker` and `db upgrade` change the schema.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

import tidings
from tidings.bootstrap import Runtime, runtime, upgrade
from tidings.config import DEFAULT_DB, load
from tidings.core.errors import TidingsError
from tidings.textfile import Unreadable, read_text

try:  # typer 0.2x carries its own copy of click; before, it used click itself
    from typer._click import exceptions as usage
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as usage  # type: ignore[no-redef]

T = TypeVar("T")
DEBUG_ENV = "TIDINGS_DEBUG"

app = typer.Typer(
    name="tidings",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _version(shown: bool) -> None:
    if shown:
        typer.echo(f"tidings {tidings.__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help=f"Show the traceback of an error \\[env: {DEBUG_ENV}=1]"),
    ] = False,
) -> None:
    """Durable notification delivery: events to chat bots, email and webhooks.

    Shell completion: `tidings --install-completion` (or `--show-completion` to copy it)."""


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Database URL, e.g. sqlite:///./tidings.db or postgresql://user@host/db "
        f"\\[env: TIDINGS_DB] \\[default: {DEFAULT_DB}]",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="Settings file (TOML) of tidings itself \\[env: TIDINGS_CONFIG] \\[default: none]",
        show_default=False,
    ),
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
    box: list[str] = []

    async def run() -> None:
        box.append(await upgrade(settings))

    run_async(run)
    typer.echo(f"database {box[0]} is up to date")


def verbose() -> None:
    """Long-running commands (serve, worker) log what they do; one-shot commands stay quiet."""
    logging.getLogger("tidings").setLevel(logging.INFO)


def with_runtime(db: str | None, config: str | None, work: Callable[[Runtime], Awaitable[T]]) -> T:
    """Run `work` against a runtime over the database the options name; its answer. The
    database must be at this tidings' schema: nothing here migrates it."""
    settings = load(config, db=db)
    box: list[T] = []

    async def run() -> None:
        async with runtime(settings) as rt:
            box.append(await work(rt))

    run_async(run)
    return box[0]


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def warn(message: str) -> None:
    """A warning on stderr: the command still did what it was asked."""
    print(f"tidings: warning: {message}", file=sys.stderr)


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
        return read_text(text[1:])
    except Unreadable as why:
        fail(f"{what}: cannot read {text[1:]}: {why}")


def run_async(run: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is absent on some platforms
        asyncio.run(run())
        return
    uvloop.run(run())


def main(argv: list[str] | None = None) -> int:
    """The `tidings` command: its exit status. `--debug` may stand anywhere on the line."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    if "--debug" in args:
        args = ["--debug", *(a for a in args if a != "--debug")]
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="tidings", standalone_mode=False)
    except usage.NoArgsIsHelpError:  # making it printed the help (rich prints as it formats)
        return 2
    except usage.ClickException as error:  # usage: one line, and where the help is
        return _usage(error)
    except typer.Exit as exit_:
        return exit_.exit_code
    except typer.Abort:
        print("tidings: aborted", file=sys.stderr)
        return 130
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except (TidingsError, Failed) as error:
        return _failed(str(error), debug)
    except Exception as error:  # a bug: still one line, the traceback under --debug
        return _failed(f"unexpected {type(error).__name__}: {error}", debug)
    return code if isinstance(code, int) else 0


def _usage(error: usage.ClickException) -> int:
    where = getattr(error, "ctx", None)
    hint = f" (see `{where.command_path} --help`)" if where is not None else ""
    message = " ".join(error.format_message().split())
    print(f"tidings: {message}{hint}", file=sys.stderr)
    return error.exit_code


def _failed(message: str, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    line = " ".join(message.split()) or "failed"
    print(f"tidings: {line}", file=sys.stderr)
    return 1
