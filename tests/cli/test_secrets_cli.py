"""Secrets on the command line: config from a file or standard input (never argv), fresh
signing secrets and keys, a signing secret rotated, and a process with a wrong key refused
with one line."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tidings.channels import signing
from tidings.cli import main
from tidings.store.secretbox import new_key, parse_key

CANARY = "cLiCaNaRy55"
CONFIG = {"url": f"https://hooks.invalid/x?token=t-{CANARY}", "secret": signing.new_secret()}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_config_json_from_a_file(
    capsys: pytest.CaptureFixture[str], db_url: str, tmp_path: Path
) -> None:
    given = tmp_path / "config.json"
    given.write_text(json.dumps(CONFIG))
    argv = ["channel", "add", "--name", "hook", "--kind", "webhook", "--db", db_url, "--json"]
    code, out, err = run(capsys, *argv, "--config-json", f"@{given}")
    assert code == 0, err
    assert CANARY not in out  # the answer shows it masked
    code, out, err = run(capsys, "channel", "list", "--json", "--db", db_url)
    assert CANARY not in out
    assert CONFIG["secret"] not in out
    code, _, err = run(capsys, *argv[:-1], "--config-json", f"@{tmp_path / 'absent.json'}")
    assert code == 1
    assert err.startswith("tidings: --config-json: cannot read")
    assert "\n" not in err.strip()


def test_config_json_from_standard_input(
    capsys: pytest.CaptureFixture[str], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(CONFIG)))
    argv = ["channel", "add", "--name", "hook", "--kind", "webhook", "--db", db_url]
    code, out, err = run(capsys, *argv, "--config-json", "-")
    assert code == 0, err
    assert "hook (webhook, realtime) added" in out


def test_inline_config_json_still_works(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    argv = ["channel", "add", "--name", "box", "--kind", "inbox", "--db", db_url]
    assert run(capsys, *argv, "--config-json", "{}")[0] == 0


def test_secret_new_and_new_key_print_fresh_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "secret", "new")
    assert code == 0
    signing.parse_secret(out.strip())
    code, again, _ = run(capsys, "secrets", "new")
    assert again != out
    code, key, _ = run(capsys, "secrets", "new-key")
    assert len(parse_key(key.strip(), "the printed key")) == 32


def test_channel_rotate_secret_prints_the_new_secret_alone_last(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    argv = ["channel", "add", "--name", "hook", "--kind", "webhook", "--db", db_url]
    run(capsys, *argv, "--config-json", json.dumps(CONFIG))
    code, out, err = run(capsys, "channel", "rotate-secret", "hook", "--db", db_url)
    assert code == 0, err
    fresh = out.strip().splitlines()[-1]
    signing.parse_secret(fresh)
    assert fresh != CONFIG["secret"]
    assert "the old one signs until" in out


def test_a_process_with_a_wrong_key_refuses_to_start_with_one_line(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    argv = ["channel", "add", "--name", "hook", "--kind", "webhook", "--db", db_url]
    assert run(capsys, *argv, "--config-json", json.dumps(CONFIG))[0] == 0
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    for command in (["worker"], ["serve", "--port", port]):
        done = subprocess.run(
            [sys.executable, "-m", "tidings", *command, "--db", db_url],
            capture_output=True,
            text=True,
            timeout=60,
            env=os.environ | {"TIDINGS_SECRET_KEY": new_key()},
        )
        assert done.returncode == 1, (command, done.stderr)
        assert done.stderr.startswith("tidings: wrong secret key"), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr


def test_secrets_rotate_through_a_key_file(
    capsys: pytest.CaptureFixture[str],
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.conftest import TEST_SECRET_KEY

    key_file = tmp_path / "keys"
    key_file.write_text(TEST_SECRET_KEY + "\n")
    monkeypatch.delenv("TIDINGS_SECRET_KEY")
    monkeypatch.setenv("TIDINGS_SECRET_KEY_FILE", str(key_file))
    argv = ["channel", "add", "--name", "hook", "--kind", "webhook", "--db", db_url]
    assert run(capsys, *argv, "--config-json", json.dumps(CONFIG))[0] == 0
    code, out, err = run(capsys, "secrets", "rotate", "--db", db_url)
    assert code == 0, err
    assert "1 channel(s) sealed under key" in out
    assert "--finish" in out
    code, out, err = run(capsys, "secrets", "rotate", "--finish", "--db", db_url)
    assert code == 0, err
    assert TEST_SECRET_KEY not in key_file.read_text()
    code, out, _ = run(capsys, "channel", "list", "--json", "--db", db_url)
    assert code == 0
    assert json.loads(out)[0]["name"] == "hook"
