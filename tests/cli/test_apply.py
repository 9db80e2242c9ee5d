"""`tidings apply -f channels.toml` and `tidings export`: declared channels, checked like every
path, all or nothing; export → apply is a no-op. Real subprocesses, on both backends."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import tidings
from tests.cli.process import one_line_error, tidings_cli
from tidings.core.states import State

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"

FILE = """\
# what the operators declare
[[channel]]
name = "ops"
kind = "inbox"
filter = { kinds = ["monitor.*"], min_severity = "high" }

[[channel]]
name = "hook"
kind = "webhook"
rate_per_min = 30

[channel.config]
url = "https://hooks.example.com/tidings"
secret = "${HOOK_SECRET}"

[[channel]]
name = "tg"
kind = "telegram"
mode = "digest"

[channel.config]
bot_token = "@telegram.token"
chat_id = "@ops_channel"
"""


def write(tmp_path: Path, text: str, name: str = "channels.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    (tmp_path / "telegram.token").write_text(TELEGRAM_TOKEN + "\n")
    return path


def apply(path: Path, db_url: str, *flags: str, secret: str = SECRET) -> tuple[int, str, str]:
    done = tidings_cli(
        "apply", "-f", str(path), *flags, "--db", db_url, env={"HOOK_SECRET": secret}
    )
    return done.returncode, done.stdout, done.stderr


def stored(db_url: str) -> dict[str, tidings.Channel]:
    with tidings.SyncHub(db_url) as hub:
        return {c.name: c for c in hub.channels.list()}


def test_apply_creates_resolves_secrets_and_is_idempotent(tmp_path: Path, db_url: str) -> None:
    path = write(tmp_path, FILE)
    code, out, err = apply(path, db_url)
    assert code == 0, err
    assert "applied: 3 create, 0 update, 0 unchanged, 0 prune" in out
    for secret in (SECRET, TELEGRAM_TOKEN):
        assert secret not in out + err
    channels = stored(db_url)
    assert channels["hook"].config == {"url": "https://hooks.example.com/tidings", "secret": SECRET}
    assert channels["hook"].rate_per_min == 30
    assert channels["tg"].config["bot_token"] == TELEGRAM_TOKEN  # @file, newline dropped
    assert channels["tg"].config["chat_id"] == "@ops_channel"  # not a secret: kept as written
    assert channels["tg"].rate_per_min == 18  # the kind's default
    assert channels["ops"].filter == {"kinds": ["monitor.*"], "min_severity": "high"}

    code, out, _ = apply(path, db_url)
    assert code == 0
    assert "nothing to do: 0 create, 0 update, 3 unchanged, 0 prune" in out
    assert stored(db_url) == channels  # not even updated_at moved


def test_dry_run_shows_the_plan_masked_and_changes_nothing(tmp_path: Path, db_url: str) -> None:
    apply(write(tmp_path, FILE), db_url)
    with tidings.SyncHub(db_url) as hub:
        hub.channels.create(name="old", kind="inbox")
    before = stored(db_url)
    changed = FILE.replace("rate_per_min = 30", "rate_per_min = 10").replace(
        'name = "ops"', 'name = "ops2"'
    )
    code, out, err = apply(
        write(tmp_path, changed), db_url, "--prune", "--dry-run", secret=OTHER_SECRET
    )
    assert code == 0, err
    rows = {line.split("│")[2].strip(): line for line in out.splitlines() if line.count("│") == 5}
    assert "create" in rows["ops2"]
    assert "update" in rows["hook"]
    assert "unchanged" in rows["tg"]
    assert "prune" in rows["old"]
    assert "prune" in rows["ops"]
    assert "rate_per_min: 30.0 → 10.0" in out
    assert f"config.secret: ••••{SECRET[-4:]} → ••••{OTHER_SECRET[-4:]}" in out
    for secret in (SECRET, OTHER_SECRET, TELEGRAM_TOKEN):
        assert secret not in out + err
    assert "would apply: 1 create, 1 update, 1 unchanged, 2 prune" in out
    assert stored(db_url) == before


def test_prune_disables_what_the_file_leaves_out(tmp_path: Path, db_url: str) -> None:
    with tidings.SyncHub(db_url) as hub:
        hub.channels.create(name="old", kind="inbox")
        hub.publish(kind="a.b", subject="s")
    path = write(tmp_path, FILE)
    assert apply(path, db_url)[0] == 0
    assert stored(db_url)["old"].enabled  # without --prune, left alone
    code, out, _ = apply(path, db_url, "--prune")
    assert code == 0
    assert "applied: 0 create, 0 update, 3 unchanged, 1 prune" in out
    old = stored(db_url)["old"]
    assert not old.enabled
    assert old.disabled_reason == "not in the channels file applied with --prune"
    with tidings.SyncHub(db_url) as hub:
        (row,) = hub.deliveries().items
    assert row.delivery.state is State.SKIPPED  # C7, as any disable


def test_a_bad_file_changes_nothing_and_names_the_line(tmp_path: Path, db_url: str) -> None:
    typo = FILE.replace('secret = "${HOOK_SECRET}"', 'secrte = "${HOOK_SECRET}"')
    line = one_line_error(tidings_cli("apply", "-f", str(write(tmp_path, typo)), "--db", db_url))
    assert line.startswith(
        f"tidings: {tmp_path / 'channels.toml'}:7: channel 'hook': config.secrte: unknown field"
    )
    assert stored(db_url) == {}  # "ops" before it is not created either

    broken = FILE.replace('kind = "inbox"', 'kind = "inbox')
    line = one_line_error(tidings_cli("apply", "-f", str(write(tmp_path, broken)), "--db", db_url))
    assert line.startswith(f"tidings: {tmp_path / 'channels.toml'}:4: not valid TOML")

    unset = tidings_cli("apply", "-f", str(write(tmp_path, FILE)), "--db", db_url)
    assert one_line_error(unset).endswith(
        "channels.toml:7: channel 'hook': config.secret: the environment variable HOOK_SECRET "
        "is not set"
    )
    twice = FILE + '\n[[channel]]\nname = "ops"\nkind = "inbox"\n'
    again = len(FILE.splitlines()) + 2
    code, _, err = apply(write(tmp_path, twice), db_url)
    assert code == 1
    assert err.strip().endswith(
        f"channels.toml:{again}: channel 'ops': declared again "
        f"(first at {tmp_path / 'channels.toml'}:2)"
    )
    assert stored(db_url) == {}


def test_export_masks_secrets_and_applies_back_as_a_no_op(tmp_path: Path, db_url: str) -> None:
    apply(write(tmp_path, FILE), db_url)
    with tidings.SyncHub(db_url) as hub:
        hub.channels.disable(hub.channels.get_by_name("ops").id, "paused")
    before = stored(db_url)
    exported = tidings_cli("export", "--db", db_url)
    assert exported.returncode == 0, exported.stderr
    for secret in (SECRET, TELEGRAM_TOKEN):
        assert secret not in exported.stdout
    assert "••••" in exported.stdout
    path = write(tmp_path, exported.stdout, "exported.toml")
    code, out, _ = apply(path, db_url, "--prune")
    assert code == 0
    assert "nothing to do: 0 create, 0 update, 3 unchanged, 0 prune" in out
    assert stored(db_url) == before

    clear = tmp_path / "clear.toml"
    done = tidings_cli("export", "--with-secrets", "-o", str(clear), "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(clear.stat().st_mode) == 0o600
    assert SECRET in clear.read_text()
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert tidings_cli("db", "upgrade", "--db", fresh).returncode == 0
    assert apply(clear, fresh)[0] == 0
    copied = stored(fresh)
    assert {n: (c.kind, c.config, c.enabled, c.rate_per_min) for n, c in copied.items()} == {
        n: (c.kind, c.config, c.enabled, c.rate_per_min) for n, c in before.items()
    }
    listed = json.loads(tidings_cli("channel", "list", "--json", "--db", fresh).stdout)
    assert SECRET not in json.dumps(listed)


def test_a_refused_destination_is_explained_by_apply(tmp_path: Path, db_url: str) -> None:
    local = FILE.replace("https://hooks.example.com/tidings", "http://127.0.0.1:9/hook")
    code, _, err = apply(write(tmp_path, local), db_url, "--dry-run")
    assert code == 0
    assert err.strip().startswith(
        "tidings: warning: channel 'hook': config.url: sends will be refused: 127.0.0.1 is a "
        "loopback address"
    )
