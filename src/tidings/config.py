"""Settings from a TOML file (`--config` / TIDINGS_CONFIG) and TIDINGS_* environment variables,
validated at start with clear messages."""

from __future__ import annotations

import os
import socket
import tomllib
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tidings.core.errors import ConfigError
from tidings.textfile import Unreadable, read_text

DEFAULT_DB = "sqlite:///./tidings.db"


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDINGS_", extra="forbid")

    db: str = DEFAULT_DB
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    lease_s: float = Field(120.0, gt=0)
    #: `serve` and `worker`: how long to wait at start for a database that cannot be reached
    #: yet (refused, starting up, out of connection slots); 0: give up at once.
    db_wait_s: float = Field(300.0, ge=0, le=86400.0)
    poll_interval_s: float = Field(1.0, gt=0, le=3600)
    worker_id: str = Field(default_factory=default_worker_id, min_length=1, max_length=200)
    allowed_private_networks: str = ""
    concurrency: int = Field(50, ge=1, le=10_000)
    #: Rows one realtime claim may lease (never more than the channel's rate budget).
    claim_size: int = Field(500, ge=1, le=5_000)
    grace_s: float = Field(20.0, ge=0, le=3600)
    #: PostgreSQL: an idle worker waits for hand-offs, rows a single publish leases to it.
    handoffs: bool = True
    #: H1: consecutive retryable failures that open a channel's circuit breaker.
    breaker_failures: int = Field(5, ge=1, le=1_000_000)
    #: H1: failing this long without a success disables a channel (default 5 days).
    disable_after_s: float = Field(432_000.0, gt=0, le=10 * 366 * 86400.0)
    #: R1: days ended deliveries, their attempts and events without a delivery are kept
    #: (0: keep everything); a channel may set its own.
    retention_days: float = Field(30.0, ge=0, le=100 * 366.0)
    #: R1: purged rows are first written to gzipped JSON Lines files in this directory.
    retention_archive_dir: str | None = None
    #: H1: the wait before an open breaker's first probe (doubling to 15 min).
    breaker_backoff_s: float = Field(30.0, gt=0, le=86400.0)
    #: Admin UI sessions (S5): ended after this long unused, and this long after login.
    session_idle_s: float = Field(1800.0, ge=60, le=30 * 86400)
    session_lifetime_s: float = Field(12 * 3600.0, ge=60, le=365 * 86400)

    @field_validator("allowed_private_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        from tidings.channels.netguard import parse_networks

        parse_networks(value)
        return value


def load(config_file: str | None = None, **overrides: Any) -> Settings:
    """Settings from the file, then the environment, then explicit overrides (CLI flags)."""
    path = config_file or os.environ.get("TIDINGS_CONFIG")
    from_file: dict[str, Any] = {}
    if path:
        try:
            from_file = tomllib.loads(read_text(path))
        except Unreadable as why:
            raise ConfigError(f"cannot read config file {path}: {why}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    if not isinstance(from_file.get("tidings", from_file), dict):
        raise ConfigError(f"config file {path}: [tidings] must be a table")
    from_file = from_file.get("tidings", from_file)
    flags = {k: v for k, v in overrides.items() if v is not None}
    try:
        # The environment wins over the file; flags win over both.
        return Settings(**{**from_file, **_environment(), **flags})
    except ValidationError as error:
        raise ConfigError(_describe(error)) from None


def _environment() -> dict[str, Any]:
    prefix = "TIDINGS_"
    names = set(Settings.model_fields)
    found: dict[str, Any] = {}
    for key, value in os.environ.items():
        name = key[len(prefix) :].lower()
        if key.startswith(prefix) and name in names:
            found[name] = value
    return found


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "settings"
        parts.append(f"{where}: {item['msg']}")
    return "invalid configuration: " + "; ".join(parts)
