"""The command line as a new user meets it, through a real subprocess: the version, shell
completion, help on every option with its default, and one-line usage errors."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer

import tidings
from tests.cli.process import tidings_cli
from tidings.cli import app, main


def options() -> list[tuple[str, typer.core.TyperOption]]:
    """Every option of every command, with the command's path."""
    found: list[tuple[str, typer.core.TyperOption]] = []

    def walk(command: object, path: str) -> None:
        for param in getattr(command, "params", []):
            if isinstance(param, typer.core.TyperOption) and not param.hidden:
                found.append((path, param))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "tidings")
    return found


def test_version() -> None:
    done = tidings_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"tidings {tidings.__version__}"
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert tomllib.loads(pyproject.read_text())["project"]["version"] == tidings.__version__


def test_shell_completion_completes_commands() -> None:
    done = tidings_cli(
        env={"_TIDINGS_COMPLETE": "complete_bash", "COMP_WORDS": "tidings chan", "COMP_CWORD": "1"}
    )
    assert done.returncode == 0
    assert done.stdout.split() == ["channel"]
    # Typer finds the shell among the process's ancestors (the argument is not read), so it
    # is asked from a bash, as a user would: a test run started by a daemon has none.
    shown = subprocess.run(
        # "; exit": bash would otherwise exec the one command and be no ancestor
        ["bash", "-c", f"{shlex.quote(sys.executable)} -m tidings --show-completion; exit $?"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "_TIDINGS_COMPLETE" in shown.stdout


def test_every_option_has_help_and_shows_its_default() -> None:
    missing = []
    for path, option in options():
        name = option.opts[0]
        if name in ("--help", "--install-completion", "--show-completion"):
            continue
        text = option.help or ""
        if not text.strip():
            missing.append(f"{path} {name}: no help")
            continue
        flag = option.is_flag or option.is_bool_flag
        shown = option.show_default is not False and option.default is not None
        if not (flag or option.required or shown or "default:" in text or "required]" in text):
            missing.append(f"{path} {name}: its default is not shown")
    assert missing == []


def test_settings_file_and_channel_config_options_cannot_be_confused() -> None:
    names = {name for _, option in options() for name in option.opts}
    assert "--config" in names  # the settings file, on every command
    assert "--adapter-config" in names  # a channel's own config
    assert "--config-json" not in names  # still accepted, no longer shown
    settings = {o.help for _, o in options() if "--config" in o.opts}
    assert all("Settings file" in (text or "") for text in settings)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["channel", "list", "--bogus"], "No such option: --bogus"),
        (["deliveries", "list", "--page", "abc"], "Invalid value for '--page'"),
        (["token", "create", "--name", "x"], "Missing option '--scope'"),
        (["nonsense"], "No such command"),
    ],
)
def test_usage_errors_are_one_line(argv: list[str], said: str) -> None:
    done = tidings_cli(*argv)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tidings: ")
    assert said in lines[0]
    assert "--help" in lines[0]  # where to look next
    assert "╭" not in done.stderr


def _loaded_in_a_fresh_process(*steps: str) -> list[str]:
    """Which heavy modules a new interpreter has loaded after importing the CLI and running
    `steps` (lines of Python)."""
    heavy = ("uvicorn", "fastapi", "starlette", "tidings.server", "aiohttp")
    script = "\n".join(
        [
            "import sys",
            "from tidings.cli import app",
            *steps,
            f"print(','.join(m for m in {heavy!r} if m in sys.modules))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [m for m in done.stdout.strip().split(",") if m]


def test_commands_other_than_serve_do_not_load_the_web_stack() -> None:
    """uvicorn, FastAPI and the app were a fifth of every command's start-up time."""
    loaded = _loaded_in_a_fresh_process()
    assert not {"uvicorn", "fastapi", "starlette", "tidings.server"} & set(loaded)


def test_commands_and_channel_checks_do_not_load_the_http_client() -> None:
    """aiohttp (~80 ms, half of it its default TLS context) is for the processes that send:
    the CLI, and a check of a channel's config against its kind, need only the kinds."""
    loaded = _loaded_in_a_fresh_process(
        "from tidings.channels.registry import Registry",
        "Registry.default().get('webhook').check_config({'url': 'https://hooks.example/x'})",
    )
    assert "aiohttp" not in loaded


def _rendered_help(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main([*argv, "--help"])
    out, _ = capsys.readouterr()
    assert code == 0, argv
    return out


def _flat(text: str) -> str:
    """Text as a reader sees it: boxes, wrapping and code marks gone."""
    text = text.replace("`", "").replace("\\[", "[")  # markup: a code span, an escape
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_help_shows_every_options_text_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rich markup read "[default: the retention_days setting]" as a style tag and dropped
    it; a docstring's line breaks broke its sentence in the list of commands."""
    monkeypatch.setenv("COLUMNS", "250")
    for path, option in options():
        if not option.help:
            continue
        argv = path.split()[1:]
        assert _flat(option.help) in _flat(_rendered_help(capsys, argv)), (path, option.opts)
    listing = _rendered_help(capsys, []).splitlines()
    for command in typer.main.get_command(app).commands.values():  # type: ignore[attr-defined]
        short = _flat((command.help or "").split("\n\n")[0])
        assert any(short in _flat(line) for line in listing), (command.name, short)
