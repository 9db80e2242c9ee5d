"""The `tidings` command line through its real entry point, on both backends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tidings import views
from tidings.channels.registry import Registry
from tidings.cli import app, main

COMMANDS = [
    [],
    ["serve"],
    ["worker"],
    ["db"],
    ["db", "upgrade"],
    ["token"],
    ["token", "create"],
    ["token", "list"],
    ["token", "revoke"],
    ["channel"],
    ["channel", "add"],
    ["channel", "list"],
    ["channel", "test"],
    ["channel", "enable"],
    ["channel", "disable"],
    ["channel", "kinds"],
    ["channel", "rotate-secret"],
    ["secrets"],
    ["secrets", "new"],
    ["secrets", "new-key"],
    ["secrets", "rotate"],
    ["secret"],
    ["secret", "new"],
    ["secret", "new-key"],
    ["secret", "rotate"],
    ["publish"],
    ["apply"],
    ["export"],
    ["deliveries"],
    ["deliveries", "list"],
    ["deliveries", "show"],
    ["deliveries", "resend"],
    ["purge"],
    ["archive"],
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_is_listed_here() -> None:
    def walk(group: typer.Typer, prefix: list[str]) -> list[list[str]]:
        found = [prefix]
        for command in group.registered_commands:
            found.append([*prefix, command.name or command.callback.__name__])  # type: ignore[union-attr]
        for sub in group.registered_groups:
            assert sub.typer_instance is not None
            found.extend(walk(sub.typer_instance, [*prefix, sub.name or ""]))
        return found

    assert sorted(walk(app, [])) == sorted(COMMANDS)


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "tidings")
def test_help_renders_for_every_command(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, _ = run(capsys, *argv, "--help")
    assert code == 0
    assert "Usage" in out


def test_token_create_prints_the_token_alone_on_its_last_line(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    code, out, _ = run(
        capsys, "token", "create", "--name", "ci", "--scope", "admin", "--db", db_url
    )
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert last.startswith("tdg_")
    assert " " not in last


def test_channels_publish_and_history(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    assert run(capsys, "channel", "add", "--name", "ops", "--kind", "inbox", "--db", db_url)[0] == 0
    code, out, _ = run(capsys, "channel", "list", "--json", "--db", db_url)
    assert [c["name"] for c in json.loads(out)] == ["ops"]
    code, out, _ = run(
        capsys,
        "publish",
        "--kind",
        "monitor.down",
        "--subject",
        "web-1",
        "--title",
        "down",
        "--db",
        db_url,
    )
    assert code == 0
    assert "1 deliveries" in out
    code, out, _ = run(capsys, "deliveries", "list", "--json", "--db", db_url)
    page = json.loads(out)
    assert page["total"] == 1
    delivery_id = page["items"][0]["id"]
    code, out, _ = run(capsys, "deliveries", "show", str(delivery_id), "--json", "--db", db_url)
    assert json.loads(out)["subject"] == "web-1"
    code, out, _ = run(capsys, "channel", "disable", "ops", "--db", db_url)
    assert "1 pending deliveries skipped" in out
    code, out, _ = run(capsys, "deliveries", "resend", str(delivery_id), "--db", db_url)
    assert code == 0
    assert "requeued" in out
    code, out, _ = run(capsys, "channel", "enable", "ops", "--db", db_url)
    assert code == 0


def test_deliveries_list_pages_by_the_cursor_it_prints(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    assert run(capsys, "channel", "add", "--name", "ops", "--kind", "inbox", "--db", db_url)[0] == 0
    for i in range(5):
        run(capsys, "publish", "--kind", "a.b", "--subject", f"s{i}", "--db", db_url)
    argv = ["deliveries", "list", "--page-size", "2", "--db", db_url]
    for expected_page in (1, 2, 3):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert f"page {expected_page} of 3, 5 in all" in out
        older = [line for line in out.splitlines() if line.startswith("older: --cursor ")]
        if expected_page < 3:
            argv = [*argv[:6], "--cursor", older[0].split()[-1]]
        else:
            assert older == []
            assert "newer: --cursor " in out
    code, out, _ = run(capsys, *argv, "--json")
    assert json.loads(out)["next_cursor"] is None


def test_publish_from_a_json_file(
    capsys: pytest.CaptureFixture[str], db_url: str, tmp_path: Path
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"kind": "a.b", "subject": "s", "idempotency_key": "k"}))
    assert run(capsys, "publish", "--json", str(event), "--db", db_url)[0] == 0
    code, out, _ = run(capsys, "publish", "--json", str(event), "--db", db_url)
    assert code == 0
    assert "already published" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["publish", "--kind", "a.b"], "--kind and --subject are required"),
        (["publish", "--kind", "has space", "--subject", "s"], "kind"),
        (["channel", "add", "--name", "x", "--kind", "pigeon"], "unknown channel kind"),
        (
            ["channel", "add", "--name", "x", "--kind", "webhook", "--config-json", "{"],
            "not valid JSON",
        ),
        (["channel", "enable", "nope"], "not found"),
        (["deliveries", "show", "999"], "delivery 999 not found"),
        (["deliveries", "resend", "999"], "not found"),
        (["deliveries", "list", "--state", "lost"], "unknown state"),
        (["deliveries", "list", "--cursor", "bogus"], "cursor: not a cursor"),
        (["token", "create", "--name", "x", "--scope", "root"], "scope"),
        (["publish", "--json", "/nonexistent.json"], "cannot read"),
    ],
)
def test_bad_input_is_one_line_and_non_zero(
    capsys: pytest.CaptureFixture[str], db_url: str, argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, "--db", db_url)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tidings: ")
    assert message in lines[0]
    assert "Traceback" not in out + err


def test_bad_database_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "deliveries", "list", "--db", "mysql://nope")
    assert code == 1
    assert err.strip() == (
        "tidings: unsupported database 'mysql' in 'mysql://nope': tidings runs on sqlite or "
        "postgresql"
    )


def test_a_real_subprocess(db_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tidings", "channel", "kinds", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    kinds = {row["kind"] for row in json.loads(done.stdout)}
    assert {"webhook", "inbox"} <= kinds
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "tidings",
            "publish",
            "--kind",
            "a.b",
            "--subject",
            "s",
            "--severity",
            "apocalyptic",
            "--db",
            db_url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("tidings: severity")
    assert "Traceback" not in bad.stderr


def test_channel_kinds_come_from_the_declarations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "channel", "kinds", "--json")
    assert code == 0
    specs = views.kind_specs(Registry.default())
    assert json.loads(out) == [spec.as_json() for spec in specs]
    code, out, _ = run(capsys, "channel", "kinds")
    assert code == 0
    wecom = next(line for line in out.splitlines() if "wecom" in line)
    assert "4096 text bytes" in wecom
    assert " 18 " in wecom
    assert "webhook_url* (secret)" in wecom
    assert "(secret)" in out
    assert "* required" in out


def test_channel_add_checks_the_config_and_applies_the_kinds_rate(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    keyless = json.dumps({"webhook_url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send"})
    code, _, err = run(
        capsys, "channel", "add", "--name", "w", "--kind", "wecom", "--config-json", keyless,
        "--db", db_url,
    )  # fmt: skip
    assert code == 1
    assert err.startswith("tidings: config.webhook_url")
    assert len(err.strip().splitlines()) == 1
    keyed = json.dumps({"webhook_url": "https://qyapi.weixin.qq.com/send?key=0123456789abcdef"})
    code, out, _ = run(
        capsys, "channel", "add", "--name", "w", "--kind", "wecom", "--config-json", keyed,
        "--db", db_url, "--json",
    )  # fmt: skip
    assert code == 0
    shown = json.loads(out)
    assert shown["rate_per_min"] == 18
    assert "0123456789abcdef" not in out


def test_m3_bulk_resend_by_filter_with_a_dry_run_first(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    import asyncio

    import tidings

    async def failed() -> None:
        async with tidings.Hub(db_url) as hub:
            ch = await hub.channels.create(name="ops", kind="inbox")
            await hub.publish_many([{"kind": "a.b", "subject": f"s{i}"} for i in range(3)])
            got = await hub.store.claim_realtime(ch.id, 10, 60, "w")
            assert got is not None
            await hub.store.fail(got.token, got.ids, "HTTP 404")

    asyncio.run(failed())
    args = ("deliveries", "resend", "--state", "failed", "--failure", "permanent", "--db", db_url)
    code, out, _ = run(capsys, *args, "--dry-run")
    assert (code, out.strip()) == (0, "3 deliveries match; none requeued (dry run)")
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert out.strip().splitlines() == ["page 1: 3 requeued of 3 matching", "3 deliveries requeued"]
    code, _, err = run(capsys, "deliveries", "resend", "--state", "sent", "--db", db_url)
    assert code != 0
    assert "only failed or skipped" in err
    code, _, err = run(capsys, "deliveries", "resend", "--db", db_url)
    assert code != 0
    assert "give a delivery id, or at least one filter" in err


def test_tokens_are_listed_and_revoked(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    code, out, _ = run(
        capsys,
        "token",
        "create",
        "--name",
        "ci",
        "--scope",
        "read",
        "--expires-in",
        "30d",
        "--db",
        db_url,
    )
    assert code == 0
    value = out.strip().splitlines()[-1]
    code, out, _ = run(
        capsys,
        "token",
        "create",
        "--name",
        "edge",
        "--scope",
        "worker",
        "--kind",
        "webhook",
        "--tenant",
        "acme",
        "--db",
        db_url,
    )
    assert code == 0
    code, out, _ = run(capsys, "token", "list", "--json", "--db", db_url)
    assert code == 0
    assert value not in out
    listed = {t["name"]: t for t in json.loads(out)}
    assert listed["ci"]["expires_at"] is not None
    assert listed["ci"]["state"] == "active"
    assert (listed["edge"]["kinds"], listed["edge"]["tenants"]) == (["webhook"], ["acme"])
    code, out, _ = run(capsys, "token", "revoke", str(listed["ci"]["id"]), "--db", db_url)
    assert code == 0
    assert "revoked" in out
    code, out, _ = run(capsys, "token", "list", "--db", db_url)
    assert code == 0
    assert "revoked" in out
    assert value not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["token", "create", "--name", "x", "--scope", "read", "--expires-in", "soon"],
            "--expires-in",
        ),
        (["token", "create", "--name", "x", "--scope", "read", "--kind", "webhook"], "kinds"),
        (["token", "revoke", "424242"], "token 424242 not found"),
    ],
)
def test_bad_token_commands_are_one_line(
    capsys: pytest.CaptureFixture[str], db_url: str, argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, "--db", db_url)
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("ref", ["²", "١"])
def test_a_channel_ref_in_other_digits_is_a_name_not_an_id(
    capsys: pytest.CaptureFixture[str], db_url: str, ref: str
) -> None:
    """`"²".isdigit()` is true: it reached `int()` ("unexpected ValueError"), and "١" read
    as channel 1."""
    assert run(capsys, "channel", "add", "--name", "one", "--kind", "inbox", "--db", db_url)[0] == 0
    code, _, err = run(capsys, "channel", "disable", ref, "--db", db_url)
    assert code == 1
    assert err.count("\n") == 1
    assert "not found" in err
    assert "unexpected" not in err
    code, out, _ = run(capsys, "channel", "list", "--json", "--db", db_url)
    assert [c["enabled"] for c in json.loads(out)] == [True]
