"""Settings: TOML file < environment < flags, validated with clear one-line messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidings.config import load
from tidings.core.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TIDINGS_DB", "TIDINGS_PORT", "TIDINGS_LEASE_S", "TIDINGS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    settings = load()
    assert settings.db == "sqlite:///./tidings.db"
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert (settings.lease_s, settings.poll_interval_s) == (120.0, 1.0)
    assert ":" in settings.worker_id
    assert settings.allowed_private_networks == ""


def test_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tidings.toml"
    path.write_text('[tidings]\ndb = "sqlite:///file.db"\nport = 9000\nlease_s = 300\n')
    monkeypatch.setenv("TIDINGS_PORT", "9100")
    monkeypatch.setenv("TIDINGS_CONFIG", str(path))
    settings = load(lease_s=240.0)
    assert settings.db == "sqlite:///file.db"
    assert settings.port == 9100
    assert settings.lease_s == 240.0


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("port = 0", "port"),
        ("lease_s = -1", "lease_s"),
        ("colour = 'red'", "colour"),
        ("allowed_private_networks = '10.0.0.5/8'", "10.0.0.5/8"),
        ("port = ", "not valid TOML"),
    ],
)
def test_bad_settings_are_one_clear_message(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml + "\n")
    with pytest.raises(ConfigError) as caught:
        load(str(path))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load(str(tmp_path / "absent.toml"))


def test_bad_environment_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_POLL_INTERVAL_S", "soon")
    with pytest.raises(ConfigError, match="poll_interval_s"):
        load()
