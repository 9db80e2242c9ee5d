"""Every file the command line reads, when it cannot be read as text: a one-line error that
names the file and why, a non-zero exit, and nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidings.cli import main


def _unreadable(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, what the error says of it)."""
    binary = tmp_path / "binary.bin"
    binary.write_bytes(b"\xff\xfe\x00[tidings]")
    folder = tmp_path / "folder"
    folder.mkdir()
    return {
        "not-utf8": (binary, "not UTF-8 text"),
        "a-directory": (folder, "Is a directory"),
        "missing": (tmp_path / "missing.txt", "No such file or directory"),
    }


def _commands(path: Path, tmp_path: Path) -> list[list[str]]:
    channels = tmp_path / "channels.toml"
    channels.write_text(
        '[[channel]]\nname = "hook"\nkind = "webhook"\n\n[channel.config]\n'
        f'url = "https://example.com/h"\nsecret = "@{path}"\n'
    )
    return [
        ["publish", "--json", str(path)],
        ["apply", "-f", str(path)],
        ["apply", "-f", str(channels)],
        ["channel", "add", "--name", "x", "--kind", "webhook", "--adapter-config", f"@{path}"],
        ["channel", "list", "--config", str(path)],
        ["publish", "--kind", "a.b", "--subject", "s", "--config", str(path)],
    ]


@pytest.mark.parametrize("case", ["not-utf8", "a-directory", "missing"])
def test_a_file_that_cannot_be_read_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], db_url: str, tmp_path: Path, case: str
) -> None:
    assert main(["db", "upgrade", "--db", db_url]) == 0
    path, reason = _unreadable(tmp_path)[case]
    for argv in _commands(path, tmp_path):
        capsys.readouterr()
        code = main([*argv, "--db", db_url])
        out, err = capsys.readouterr()
        assert code == 1, (argv, out, err)
        assert err.startswith("tidings: "), (argv, err)
        assert err.count("\n") == 1, (argv, err)
        assert "unexpected" not in err, (argv, err)
        assert path.name in err, (argv, err)
        assert reason in err, (argv, err)
    assert main(["channel", "list", "--json", "--db", db_url]) == 0
    assert capsys.readouterr().out.strip() == "[]"
