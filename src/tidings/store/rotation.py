"""Rotating the secret key without downtime (S4): a new primary key, every channel sealed
again under it while the old key stays readable, then the old key dropped.

With a key file, `start` writes the new key first in it and keeps the old ones after it;
running processes read the changed file at their next secret read or write. With
TIDINGS_SECRET_KEY, the operator sets the new key there and the old one in
TIDINGS_SECRET_KEY_OLD, and `start` seals every channel under the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import delete
from sqlalchemy.engine import Connection

from tidings.core.errors import ConfigError
from tidings.store import keys, sealing
from tidings.store.clock import TxClock
from tidings.store.runner import Runner
from tidings.store.schema import secret_keys
from tidings.store.secretbox import new_key


@dataclass(frozen=True, slots=True)
class Rotation:
    #: The key every channel's secrets are now under.
    primary: str
    #: Channels sealed again.
    resealed: int
    #: Keys still held (readable) besides the primary.
    others: tuple[str, ...]
    #: The key file written, when the keys live in one.
    key_file: Path | None


def _file_of(store: Runner) -> Path | None:
    """The key file the store's keys come from, or None (the environment, the Hub)."""
    return store.sealer.ring.file


async def start(store: Runner) -> Rotation:
    """A new primary key (written first in the key file, when there is one) and every
    channel sealed under it; the old keys stay readable."""
    path = _file_of(store)
    if path is not None:
        lines = [ln.strip() for ln in path.read_text().splitlines()]
        held = [ln for ln in lines if ln and not ln.startswith("#")]
        keys.write_key_file(path, [new_key(), *held])
    return await _resealed(store, path)


async def finish(store: Runner) -> Rotation:
    """Seal whatever an old key still holds, then forget the old keys: out of the key file
    (when there is one) and out of the database's list, so a process that still has only an
    old key is refused from now on."""
    path = _file_of(store)
    rotation = await _resealed(store, path)
    if path is not None:
        primary = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
        keys.write_key_file(path, primary[:1])
        store.sealer.ring.refresh()

    def forget(conn: Connection, _clock: TxClock) -> None:
        if keys.kids_in_use(conn) - {rotation.primary}:
            raise ConfigError("a channel was sealed under an old key meanwhile: run it again")
        conn.execute(delete(secret_keys).where(secret_keys.c.kid != rotation.primary))

    await store._run(forget)
    return Rotation(rotation.primary, rotation.resealed, (), path)


async def _resealed(store: Runner, path: Path | None) -> Rotation:
    ring = store.sealer.ring
    ring.refresh()
    count = await store._run(lambda conn, clock: sealing.reseal(conn, clock.now()))
    others = tuple(k for k in ring.kids if k != ring.primary)
    return Rotation(ring.primary, count, others, path)
