"""Where a store's secret keys come from (S4), and the database's word on them.

Sources, the first found wins: keys handed to the Hub; `TIDINGS_SECRET_KEY` (base64 of 32
bytes) with `TIDINGS_SECRET_KEY_OLD` (comma-separated keys still readable during a rotation);
the key file `TIDINGS_SECRET_KEY_FILE`, by default `tidings.key` beside a SQLite database
(`./tidings.key` for PostgreSQL). A key file holds one base64 key a line, the primary first.

The database remembers the ids of its deployment's keys (`secret_keys`): a process is let in
only with a key the database knows (the first process of a new database brings the first
key, creating the key file when none is configured) and only when it holds every key its
channels' secrets are under, so a wrong or missing key stops it at start, never row by row.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.engine import URL, Connection

from tidings.core.errors import ConfigError
from tidings.store.schema import channels, secret_keys
from tidings.store.secretbox import Keyring, kid_of, new_key, parse_key

ENV_KEY = "TIDINGS_SECRET_KEY"
ENV_OLD = "TIDINGS_SECRET_KEY_OLD"
ENV_FILE = "TIDINGS_SECRET_KEY_FILE"
DEFAULT_FILE = "tidings.key"
_FILE_HEADER = (
    "# tidings secret keys: one base64 key a line, the first encrypts, every one decrypts.\n"
    "# Without them the channels' secrets in the database cannot be read: back this file up.\n"
)


def key_file(url: URL) -> Path:
    """TIDINGS_SECRET_KEY_FILE, or `tidings.key` beside a SQLite file (else ./tidings.key)."""
    named = os.environ.get(ENV_FILE)
    if named:
        return Path(named)
    if url.get_backend_name() == "sqlite" and url.database:
        return Path(url.database).parent / DEFAULT_FILE
    return Path(DEFAULT_FILE)


def configured(url: URL, given: Sequence[str] | None = None) -> Keyring | None:
    """The keys this process was given, from the first source that has any; None when no
    source has a key (and no key file was named)."""
    if given:
        found = [parse_key(k, f"secret key {i + 1} given to the Hub") for i, k in enumerate(given)]
        return Keyring(found, source="the keys given to the Hub")
    if os.environ.get(ENV_KEY):
        old = [k for k in os.environ.get(ENV_OLD, "").split(",") if k.strip()]
        keys = [parse_key(os.environ[ENV_KEY], ENV_KEY), *(parse_key(k, ENV_OLD) for k in old)]
        return Keyring(keys, source=ENV_KEY)
    path = key_file(url)
    if path.exists():
        return file_keyring(path)
    if os.environ.get(ENV_FILE):
        raise ConfigError(f"{ENV_FILE} names {path}, which does not exist")
    return None


class _KeyFile:
    """A key file, read again when it changes (a rotation rewrites it under running
    processes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None

    def read(self) -> list[bytes]:
        try:
            stat = self.path.stat()
            lines = self.path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"cannot read the key file {self.path}: {error}") from None
        self._stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        return [
            parse_key(line, f"key file {self.path}, line {number}")
            for number, line in enumerate(lines, start=1)
            if line.strip() and not line.lstrip().startswith("#")
        ]

    def changed(self) -> list[bytes] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        if (stat.st_mtime_ns, stat.st_size, stat.st_ino) == self._stamp:
            return None
        return self.read()


def file_keyring(path: Path) -> Keyring:
    reader = _KeyFile(path)
    return Keyring(reader.read(), source=f"the key file {path}", reload=reader.changed, file=path)


def create_key_file(path: Path) -> bool:
    """A new key file with one fresh key, mode 0600; False when one appeared meanwhile."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError as error:
        raise ConfigError(f"cannot create the key file {path}: {error.strerror}") from None
    with os.fdopen(fd, "w") as out:
        out.write(_FILE_HEADER + new_key() + "\n")
        out.flush()
        os.fsync(out.fileno())
    return True


def write_key_file(path: Path, keys: Sequence[str]) -> None:
    """Replace the key file at once (mode 0600): readers see the old file or the new one."""
    temporary = path.with_name(path.name + ".new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(_FILE_HEADER + "".join(f"{key}\n" for key in keys))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


# -- the database's word ---------------------------------------------------------------------


def kids_in_use(conn: Connection) -> set[str]:
    """The ids of the keys the stored channel secrets are under."""
    found = conn.scalars(select(channels.c.secrets).where(channels.c.secrets.is_not(None)))
    return {kid_of(text) or "unknown" for text in found}


def known_kids(conn: Connection) -> set[str]:
    return set(conn.scalars(select(secret_keys.c.kid)))


def admit(conn: Connection, ring: Keyring, now: datetime) -> None:
    """Let `ring` in, or raise ConfigError saying why (one line): the database must know one
    of its keys, unless it knows none yet, and every key in use must be in it. Its primary
    is recorded as known. Runs under the migration lock: two first starts never both win."""
    from tidings.store.dialects import dialect_for  # the dialects read channels: a cycle

    dialect_for(conn).migration_lock(conn)
    known = known_kids(conn)
    held = set(ring.kids)
    if known and not known & held:
        raise ConfigError(
            f"wrong secret key: this database's channel secrets are kept under key "
            f"{', '.join(sorted(known))}, and {ring.source} holds {', '.join(ring.kids)}"
        )
    missing = kids_in_use(conn) - held
    if missing:
        raise ConfigError(
            f"channel secrets are encrypted under key {', '.join(sorted(missing))}, which "
            f"{ring.source} does not hold (keep the old key readable until a rotation ends)"
        )
    if ring.primary not in known:
        conn.execute(insert(secret_keys).values(kid=ring.primary, created_at=now))


def no_key(url: URL) -> ConfigError:
    return ConfigError(
        f"this database's channel secrets are encrypted and no secret key is configured: set "
        f"{ENV_KEY} or {ENV_FILE} (on first start tidings created {key_file(url)})"
    )
