"""S4 on both backends: secrets stored encrypted, a dump alone reveals none, a missing or
wrong key stops the store at start, plain rows of older versions are sealed on start, and the
key rotates while the old one stays readable."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

import tidings
from tests.conftest import TEST_SECRET_KEY
from tidings.channels import signing
from tidings.core.errors import ConfigError
from tidings.store.secretbox import new_key

CANARY = "sEcReTcAnArY42"
WHSEC = signing.new_secret()
CONFIG = {
    "url": f"https://u:pw-{CANARY}@hooks.invalid/x?token=q-{CANARY}",
    "secret": WHSEC,
    "headers": {"X-Api-Key": f"b-{CANARY}"},
}


async def _webhook(hub: tidings.Hub, name: str = "hook") -> tidings.Channel:
    return await hub.channels.create(name=name, kind="webhook", config=CONFIG)


def _dump(db_url: str) -> bytes:
    """What someone holding the database alone can read: the files, or every column."""
    if db_url.startswith("sqlite"):
        path = Path(db_url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT * FROM channels").fetchall()
        keys = conn.execute("SELECT * FROM secret_keys").fetchall()
    return repr((rows, keys)).encode()


async def test_s4_a_database_dump_reveals_no_secret(hub: tidings.Hub, db_url: str) -> None:
    created = await _webhook(hub)
    await hub.store.update_channel_config(created.id, {"max_body_bytes": 4096})
    dump = _dump(db_url)
    for secret in (CANARY, WHSEC.removeprefix("whsec_")):
        assert secret.encode() not in dump
    assert b"hooks.invalid" not in dump  # a URL with secret parts is sealed whole
    assert (await hub.channels.get(created.id)).config == CONFIG | {"max_body_bytes": 4096}


async def test_s4_the_dispatcher_sees_plain_values(hub: tidings.Hub) -> None:
    created = await _webhook(hub)
    await hub.publish(kind="a.b", subject="s")
    claim = await hub.store.claim_realtime(created.id, 10, 60, "w")
    assert claim is not None
    assert claim.channel.config == CONFIG
    assert [c.config for c in await hub.store.due_channels()] in ([], [CONFIG])


async def test_s4_without_the_key_the_store_refuses_to_start(
    hub: tidings.Hub, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _webhook(hub)
    monkeypatch.delenv("TIDINGS_SECRET_KEY")
    monkeypatch.setenv("TIDINGS_SECRET_KEY_FILE", str(tmp_path / "absent.key"))
    async with tidings.Hub(db_url) as other:
        with pytest.raises(ConfigError, match=r"absent\.key, which does not exist"):
            await other.migrate()
    monkeypatch.delenv("TIDINGS_SECRET_KEY_FILE")
    monkeypatch.chdir(tmp_path)  # no default key file here, nor beside the SQLite file
    async with tidings.Hub(db_url) as other:
        with pytest.raises(ConfigError, match="no secret key is configured"):
            await other.migrate()
        with pytest.raises(ConfigError, match="no secret key is configured"):
            await other.channels.list()
    assert not (tmp_path / "tidings.key").exists()  # never a second, different key


async def test_s4_a_wrong_key_refuses_to_start_and_reads_fail_clearly(
    hub: tidings.Hub, db_url: str
) -> None:
    await _webhook(hub)
    async with tidings.Hub(db_url, secret_keys=[new_key()]) as other:
        with pytest.raises(ConfigError, match="wrong secret key"):
            await other.migrate()
        with pytest.raises(ConfigError, match="does not hold"):
            await other.channels.list()


async def test_s4_a_new_database_admits_only_its_first_key(db_url: str) -> None:
    async with tidings.Hub(db_url) as first:
        await first.migrate()  # the first start: its key becomes the database's
    async with tidings.Hub(db_url, secret_keys=[new_key()]) as other:
        with pytest.raises(ConfigError, match="wrong secret key"):
            await other.migrate()


async def test_s4_plain_secrets_of_an_older_version_are_sealed_on_start(
    hub: tidings.Hub, db_url: str
) -> None:
    created = await _webhook(hub)
    async with hub.store.engine.begin() as conn:  # as an older version stored it
        await conn.execute(
            text("UPDATE channels SET config = :config, secrets = NULL WHERE id = :id"),
            {"config": json.dumps(CONFIG), "id": created.id},
        )
    assert CANARY.encode() in _dump(db_url)
    await hub.migrate()
    assert CANARY.encode() not in _dump(db_url)
    assert (await hub.channels.get(created.id)).config == CONFIG


async def test_s4_first_start_creates_a_private_key_file_beside_sqlite(
    tmp_path: Path, sqlite_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDINGS_SECRET_KEY")
    path = tmp_path / "tidings.db"
    shutil.copy(sqlite_template, path)
    async with tidings.Hub(f"sqlite:///{path}") as hub:
        await hub.migrate()
        await _webhook(hub)
    key_file = tmp_path / "tidings.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    async with tidings.Hub(f"sqlite:///{path}") as again:  # the next start reads it
        await again.migrate()
        assert (await again.channels.get_by_name("hook")).config == CONFIG


async def test_s4_rotation_through_a_key_file_keeps_every_secret_readable(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDINGS_SECRET_KEY")
    key_file = tmp_path / "keys"
    key_file.write_text(TEST_SECRET_KEY + "\n")
    os.chmod(key_file, 0o600)
    monkeypatch.setenv("TIDINGS_SECRET_KEY_FILE", str(key_file))
    async with tidings.Hub(db_url) as hub, tidings.Hub(db_url) as running:
        await hub.migrate()
        created = await _webhook(hub)
        assert (await running.channels.get(created.id)).config == CONFIG  # holds the old key
        started = await hub.store.rotate_key()
        assert started.resealed == 1
        assert len(started.others) == 1
        new_primary = key_file.read_text().split("\n")[2]
        # A process that started before the rotation reads the new key from the changed file.
        assert (await running.channels.get(created.id)).config == CONFIG
        await running.channels.update(created.id, name="renamed")
        finished = await hub.store.rotate_key(finish=True)
        assert finished.primary == started.primary
        assert finished.others == ()
    assert TEST_SECRET_KEY not in key_file.read_text()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    monkeypatch.delenv("TIDINGS_SECRET_KEY_FILE")
    async with tidings.Hub(db_url, secret_keys=[new_primary]) as fresh:
        await fresh.migrate()
        assert (await fresh.channels.get(created.id)).config == CONFIG
    async with tidings.Hub(db_url, secret_keys=[TEST_SECRET_KEY]) as old:
        with pytest.raises(ConfigError, match="wrong secret key"):
            await old.migrate()


async def test_s4_rotation_through_the_environment(
    hub: tidings.Hub, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = await _webhook(hub)
    new = new_key()
    async with tidings.Hub(db_url, secret_keys=[new, TEST_SECRET_KEY]) as rotating:
        assert (await rotating.store.rotate_key()).resealed == 1
    async with tidings.Hub(db_url, secret_keys=[new]) as after:
        await after.migrate()
        assert (await after.channels.get(created.id)).config == CONFIG
