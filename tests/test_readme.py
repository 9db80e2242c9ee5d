"""The README as a new user follows it: the quick start's commands against a real `tidings
serve`, the Python example run twice on both backends, the channels file applied, and every
command of the CLI table (with its options) run through the real entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.server import serve
from tests.cli.process import tidings_cli
from tests.conftest import postgres

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README) if lang == language]


def json_documents(text: str) -> list[Any]:
    """The JSON documents printed one after another (curl adds no newline)."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        found.append(value)
    return found


def test_the_quick_start_as_written(tmp_path: Path) -> None:
    make_run, first_publish = blocks("sh")[:2]
    assert "make run" in make_run
    recipe = (ROOT / "Makefile").read_text().split("\nrun: ")[1].splitlines()[1].strip()
    assert recipe == "$(BIN)/tidings serve"  # what `make run` starts, started here
    served = serve(tmp_path)
    try:
        port = served.base_url.rsplit(":", 1)[1]
        script = first_publish.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
        script = re.sub(r"^TOKEN=tdg_….*$", f"TOKEN={served.token}", script, flags=re.M)
        done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        published, page = json_documents(done.stdout)
        assert published["event"]["subject"] == "web-1"
        assert len(published["deliveries"]) == 1
        shown = re.search(r"# → (.*)$", first_publish, re.M)
        assert shown is not None
        last = script.strip().splitlines()[-2]  # the read, repeated until the send is recorded
        deadline = time.monotonic() + 10
        while page["items"][0]["state"] != "sent" and time.monotonic() < deadline:
            again = subprocess.run(
                ["bash", "-c", last],
                capture_output=True,
                text=True,
                env={**os.environ, "TOKEN": served.token},
            )
            page = json.loads(again.stdout)
        item = page["items"][0]
        assert (item["id"], item["channel_name"], item["state"], item["attempts"]) == (
            1,
            "inbox",
            "sent",
            1,
        )
        assert page["total"] == 1
    finally:
        assert served.stop() == 0


@pytest.fixture(params=["sqlite", "postgresql"])
def example_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None: the example's own URL, as written; else a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    server = postgres()
    name = server.create_database("tidings_readme")
    try:
        yield server.url(name)
    finally:
        server.drop_database(name)


def test_the_python_example_runs_and_runs_again(tmp_path: Path, example_url: str | None) -> None:
    example = next(b for b in blocks("python") if b.startswith("import asyncio"))
    if example_url is not None:
        example = example.replace('"sqlite:///./tidings.db"', repr(example_url))
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", example], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.split("\n"))
    assert outputs[0][:2] == ["True ['pending']", "1"]
    assert outputs[1][:2] == ["False ['pending']", "1"]  # the same event, not a second one


def test_the_channels_file_applies_as_written(tmp_path: Path) -> None:
    (channels,) = blocks("toml")[:1]
    (tmp_path / "channels.toml").write_text(channels)
    db = f"sqlite:///{tmp_path / 'tidings.db'}"
    assert tidings_cli("db", "upgrade", "--db", db).returncode == 0
    env = {"OPS_HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
    done = tidings_cli("apply", "-f", "channels.toml", "--db", db, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "applied: 1 create" in done.stdout


def cli_table() -> list[str]:
    section = README.split("## Command line", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(tidings [^`]+)` \|", section, re.M)


def test_every_command_of_the_cli_table_exists_with_its_options() -> None:
    """Each row's command (a/b/c: each of them) answers --help, naming every option the row
    shows; all through the real entry point in one process."""
    checks: list[tuple[list[str], list[str]]] = []
    for row in cli_table():
        words = row.split()[1:]
        head = []
        for word in words:
            if word.startswith(("-", "[")):
                break
            head.append(word)
        options = re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])\b", row)
        *group, last = head
        for command in last.split("/"):
            checks.append(([*group, command], options))
    assert len(checks) >= 16
    script = textwrap.dedent(
        f"""
        import contextlib, io, json
        from tidings.cli import main
        found = []
        for argv, options in {checks!r}:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main([*argv, "--help"])
            found.append((argv, code, [o for o in options if o not in out.getvalue()]))
        print(json.dumps(found))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(argv, code, missing) for argv, code, missing in results if code or missing] == []


def as_written(row: str, values: dict[str, str]) -> list[str]:
    """A table row's command with its optional parts left out and placeholders filled."""
    required = re.sub(r"\[[^\]]*\]", "", row).split()[1:]
    return [values.get(word, word) for word in required]


def test_the_one_shot_commands_of_the_cli_table_run_as_written(tmp_path: Path) -> None:
    (tmp_path / "channels.toml").write_text(blocks("toml")[0])
    rows = {tuple(r.split()[1:3]): r for r in cli_table()}
    values = {"N": "readme", "K": "monitor.down", "S": "web-1"}
    env = {
        "TIDINGS_DB": f"sqlite:///{tmp_path / 'tidings.db'}",
        "OPS_HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    }
    session = [
        ("db", "upgrade"),
        ("token", "create"),
        ("channel", "kinds"),
        ("apply", "-f"),
        ("publish", "--kind"),
        ("export",),
    ]
    outputs = {}
    for key in session:
        row = next(r for k, r in rows.items() if k[: len(key)] == key)
        done = tidings_cli(*as_written(row, values), env=env, cwd=tmp_path)
        assert done.returncode == 0, (row, done.stderr)
        outputs[key[0]] = done.stdout
    assert outputs["token"].strip().splitlines()[-1].startswith("tdg_")
    assert "applied: 1 create" in outputs["apply"]
    assert "event #1 published" in outputs["publish"]
    assert 'name = "ops-hook"' in outputs["export"]
