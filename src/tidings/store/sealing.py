"""A channel's config split on its way in and joined on its way out (S4): the values its kind
declares secret (whole or in parts) are sealed into `channels.secrets`, the rest stays plain
in `channels.config`. Everything above the store sees whole, plain configs.

Each operation finds its store's Sealer on its connection (`conn.info`), put there by the
runner; which fields are secret is told by the Hub (`sensitive`: kind → field names, None for
a kind it does not know, whose whole config is sealed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import URL, Connection

from tidings.core.errors import ConfigError
from tidings.core.model import Channel
from tidings.store import keys, rows
from tidings.store.schema import channels
from tidings.store.secretbox import Keyring, kid_of

#: kind → the names of its secret config fields; None: unknown, seal the whole config.
Sensitive = Callable[[str], Sequence[str] | None]
_INFO_KEY = "tidings.sealer"


def everything(_kind: str) -> None:
    """The policy of a store told nothing: every config value is sealed."""
    return


class Sealer:
    """One store's keys (found on first need) and its policy of which values are secret."""

    def __init__(
        self, url: URL, given: Sequence[str] | None = None, sensitive: Sensitive = everything
    ) -> None:
        self.url = url
        self.sensitive = sensitive
        self._given = list(given) if given else None
        self._ring: Keyring | None = None
        self._admitted: set[str] = set()

    def put_on(self, conn: Connection) -> None:
        conn.info[_INFO_KEY] = self

    @property
    def ring(self) -> Keyring:
        """The keys for a read; a ConfigError when this process has none."""
        if self._ring is None:
            self._ring = keys.configured(self.url, self._given)
            if self._ring is None:
                raise keys.no_key(self.url)
        return self._ring

    def admitted(self, conn: Connection, now: datetime) -> Keyring:
        """The keys for a write, let in by the database (`keys.admit`) once per primary key.
        A database that knows no key yet, met by a process that has none, gets a new key
        file (the first start)."""
        if self._ring is None:
            self._ring = keys.configured(self.url, self._given)
        if self._ring is None:
            if keys.known_kids(conn) or keys.kids_in_use(conn):
                raise keys.no_key(self.url)
            keys.create_key_file(keys.key_file(self.url))
            self._ring = keys.file_keyring(keys.key_file(self.url))
        self._ring.refresh()
        if self._ring.primary not in self._admitted:
            keys.admit(conn, self._ring, now)
            self._admitted.add(self._ring.primary)
        return self._ring

    def split(self, kind: str, config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(plain values, secret values) of a config, as the kind declares them."""
        names = self.sensitive(kind)
        secret = {k: v for k, v in config.items() if names is None or k in names}
        return {k: v for k, v in config.items() if k not in secret}, secret


def sealer_of(conn: Connection) -> Sealer:
    found = conn.info.get(_INFO_KEY)
    if not isinstance(found, Sealer):
        raise ConfigError("this connection belongs to no tidings store")
    return found


def sealed(conn: Connection, now: datetime, kind: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The `config` and `secrets` column values of a channel's config."""
    sealer = sealer_of(conn)
    plain, secret = sealer.split(kind, config)
    ciphertext = sealer.admitted(conn, now).encrypt(secret) if secret else None
    return {"config": plain, "secrets": ciphertext}


def channel(conn: Connection, row: Mapping[Any, Any]) -> Channel:
    """A channel row with its secrets opened: the whole config."""
    ciphertext = row["secrets"]
    opened = sealer_of(conn).ring.decrypt(ciphertext) if ciphertext is not None else None
    return rows.channel(row, opened)


def reseal(conn: Connection, now: datetime) -> int:
    """Bring every channel under the primary key: plain secrets stored before S4 (the first
    start after the upgrade) and values under an older key (a rotation). Each row is written
    only if unchanged since it was read; how many were written."""
    sealer = sealer_of(conn)
    ring = sealer.admitted(conn, now)
    changed = 0
    cols = channels.c
    for row in conn.execute(select(cols.id, cols.kind, cols.config, cols.secrets)).mappings():
        ciphertext = row["secrets"]
        opened = ring.decrypt(ciphertext) if ciphertext is not None else {}
        plain, secret = sealer.split(row["kind"], dict(row["config"]) | opened)
        if ciphertext is None and not secret:
            continue
        if secret and plain == row["config"] and kid_of(ciphertext or "") == ring.primary:
            continue
        same = cols.secrets.is_(None) if ciphertext is None else cols.secrets == ciphertext
        values = {"config": plain, "secrets": ring.encrypt(secret) if secret else None}
        stmt = update(channels).where(cols.id == row["id"], same).values(values)
        changed += conn.execute(stmt).rowcount
    return changed
