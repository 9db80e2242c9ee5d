"""What a new user expects of the command line, through real subprocesses: each kind's fields
with an example that works, a publish that matched no channel said so, and a destination the
address guard refuses explained when the channel is added."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.cli.process import tidings_cli
from tidings.channel_rules import ChannelRules
from tidings.channels.registry import Registry


@pytest.mark.parametrize("kind", Registry.default().kinds())
def test_every_kind_declares_an_example_that_passes_its_checks(kind: str) -> None:
    rules = ChannelRules(Registry.default())
    example = rules.registry.get(kind).spec.example
    rules.new({"name": "x", "kind": kind, "config": dict(example)})


def test_channel_kinds_shows_an_example_command_per_kind(db_url: str) -> None:
    done = tidings_cli("channel", "kinds")
    assert done.returncode == 0, done.stderr
    lines = {
        line.split("--kind ")[1].split()[0]: line.strip()
        for line in done.stdout.splitlines()
        if line.strip().startswith("tidings channel add")
    }
    assert set(lines) == set(Registry.default().kinds())
    argv = shlex.split(lines["webhook"])[1:]  # as a user would paste it
    added = tidings_cli(*argv, "--db", db_url)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("channel #1 my-webhook (webhook, realtime) added")


def test_a_publish_that_matched_no_channel_says_so(db_url: str) -> None:
    tidings_cli("channel", "add", "--name", "f", "--kind", "inbox", "--filter-json",
                '{"kinds": ["finding.*"]}', "--db", db_url)  # fmt: skip
    done = tidings_cli("publish", "--kind", "monitor.down", "--subject", "s", "--db", db_url)
    assert done.returncode == 0
    assert done.stdout.strip().endswith("published; 0 deliveries")
    assert done.stderr.strip() == "tidings: warning: no channel matched: 1 channels checked"
    matched = tidings_cli("publish", "--kind", "finding.new", "--subject", "s", "--db", db_url)
    assert (matched.returncode, matched.stderr) == (0, "")


def test_a_loopback_target_is_explained_when_added(db_url: str) -> None:
    config = json.dumps({"url": "http://localhost:9/hook"})
    argv = ["channel", "add", "--name", "local", "--kind", "webhook", "--adapter-config", config]
    done = tidings_cli(*argv, "--db", db_url)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tidings: warning: config.url: sends will be refused: 'localhost'")
    assert "is a loopback address" in line  # 127.0.0.1 or ::1, as the resolver answers
    assert "allow it with TIDINGS_ALLOWED_PRIVATE_NETWORKS (e.g. " in line
    allowed = tidings_cli(
        *argv[:3], "local2", *argv[4:], "--db", db_url,
        env={"TIDINGS_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8"},
    )  # fmt: skip
    assert (allowed.returncode, allowed.stderr) == (0, "")
