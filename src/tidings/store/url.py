"""Database URLs as users write them (`sqlite:///./x.db`, `postgresql://u@h/db`) → driver URLs."""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from tidings.core.errors import ConfigError

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_ALIASES = {"postgres": "postgresql"}


def parse(url: str) -> URL:
    """The async driver URL for `url`; a clear ConfigError for anything else."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(
            f"not a database URL: {url!r} (use sqlite:///… or postgresql://…)"
        ) from exc
    backend = _ALIASES.get(parsed.get_backend_name(), parsed.get_backend_name())
    if backend not in _ASYNC_DRIVERS:
        raise ConfigError(
            f"unsupported database {backend!r} in {url!r}: tidings runs on sqlite or postgresql"
        )
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ConfigError(
            "an in-memory SQLite database cannot be shared between the API and the dispatcher; "
            "give a file path, e.g. sqlite:///./tidings.db"
        )
    return parsed.set(drivername=_ASYNC_DRIVERS[backend])


def shown(url: str) -> str:
    """`url` as messages may name it: the password masked (`***`), the rest as given."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<not a database URL>"
