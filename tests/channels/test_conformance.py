"""The channel conformance suite: every check every kind must pass, run over the table of
kinds in `table.py` (each against its own emulator on 127.0.0.1), in the manner of River's
driver test suite. Each vendor's file keeps only what is particular to that vendor.

Checked for every kind: the declaration is consistent (and matches the README's table);
config is validated from the declaration (an unknown key, each missing required field and
each wrongly typed field is refused naming it); secrets are redacted in reads and never in an
outcome; a receiver that hangs is a retry, a refused connection is a retry; each kind of
answer gives its outcome; a message at the limit goes and no rendered size exceeds the
limit; an unexpected exception is a scrubbed retry whose traceback goes to the log only;
and one real message goes end to end through a dispatcher, on both backends.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import tidings
from tests.channels.harness import (
    CANARY,
    LOOPBACK,
    assert_no_secret,
    assert_redacted,
    assert_within_limit,
    channel,
    event,
    send_one,
)
from tests.channels.table import ROWS, Row, closed_port
from tests.dispatch.helpers import running, settled
from tidings.channels.base import Adapter, SendContext, Target
from tidings.channels.http import HttpClient
from tidings.channels.registry import Registry, builtin_adapters
from tidings.core.errors import ValidationError
from tidings.core.kinds import FieldType
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, Reason, Retry
from tidings.core.redact import MASK, masked_config
from tidings.core.states import Mode, State
from tidings.core.validate import channel_spec
from tidings.dispatch import sending
from tidings.dispatch.sending import render_single
from tidings.render import Flavour

README = Path(__file__).resolve().parents[2] / "README.md"
REGISTRY = Registry(builtin_adapters())
KINDS = [row.kind for row in ROWS]
#: A value of the wrong type for each field type (each must be refused naming the field).
WRONG: dict[FieldType, object] = {
    FieldType.STRING: 42,
    FieldType.URL: "ftp://elsewhere.example/x",
    FieldType.INTEGER: "many",
    FieldType.STRING_OR_INTEGER: 4.5,
    FieldType.BOOLEAN: "yes",
    FieldType.CHOICE: "none-of-these",
    FieldType.STRING_LIST: 42,
    FieldType.STRING_MAP: ["not", "a", "map"],
}


@pytest.fixture(params=ROWS, ids=KINDS)
def row(request: pytest.FixtureRequest) -> Row:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def emulator(row: Row) -> Iterator[Any]:
    with row.start() as emu:
        yield emu


def adapter_of(row: Row) -> Adapter:
    return REGISTRY.get(row.kind)


def make(row: Row, emu: Any, **fields: Any) -> Channel:
    adapter = adapter_of(row)
    return channel(row.kind, adapter.validate_config(row.config(emu)), **fields)


# --- the declarations -------------------------------------------------------------------------


def readme_kinds() -> set[str]:
    text = README.read_text(encoding="utf-8")
    table = text.split("| kind | `config` | limit | default rate/min |", 1)[1]
    rows = table.split("\n\n", 1)[0].splitlines()
    return {m.group(1) for line in rows if (m := re.match(r"\| `([a-z_]+)` \|", line))}


def test_the_built_in_kinds_are_the_readmes_and_the_tables() -> None:
    kinds = {adapter.kind for adapter in builtin_adapters()}
    assert kinds == readme_kinds()
    assert kinds - {"inbox"} == set(KINDS)  # the inbox has no emulator: it stores locally
    for kind in kinds:  # every built-in kind is a valid channel kind
        assert channel_spec(name=kind, kind=kind).kind == kind


@pytest.mark.parametrize("adapter", builtin_adapters(), ids=lambda a: a.kind)
def test_every_declaration_is_consistent(adapter: Adapter) -> None:
    spec = adapter.spec
    assert type(adapter).kind == adapter.kind == spec.kind
    assert spec.description.strip()
    limit = spec.limit
    assert limit is not None, "every kind declares its size limit"
    assert limit.amount > 0
    assert adapter.size_limit(channel(spec.kind, {})) == limit.amount
    assert spec.default_rate_per_min >= 0
    assert spec.flavour in {f.value for f in Flavour} | {"json"}
    for field in spec.fields:
        assert field.description.strip().endswith("."), f"{spec.kind}.{field.name}"
        assert field.description[0].isupper(), f"{spec.kind}.{field.name}"
    assert adapter.secret_fields == tuple(f.name for f in spec.fields if f.secret)
    assert spec.as_json()["kind"] == spec.kind


def test_keyed_urls_bot_tokens_passwords_and_signing_secrets_are_secret() -> None:
    secret = {a.kind: set(a.secret_fields) for a in builtin_adapters()}
    for kind in ("wecom", "slack", "teams", "discord"):
        assert secret[kind] == {"webhook_url"}
    for kind in ("dingtalk", "feishu"):
        assert secret[kind] == {"webhook_url", "secret"}
    assert secret["webhook"] == {"secret", "previous_secret"}
    webhook = {a.kind: a for a in builtin_adapters()}["webhook"].spec
    assert set(webhook.sensitive_fields) == {"url", "secret", "previous_secret", "headers"}
    assert secret["telegram"] == {"bot_token"}
    assert secret["email"] == {"password"}
    assert secret["apprise"] == {"urls"}


# --- config validated from the declaration ------------------------------------------------


def checked(row: Row) -> dict[str, Any]:
    if row.kind == "apprise":
        pytest.importorskip("apprise")
    return adapter_of(row).validate_config(dict(row.example))


def refused(row: Row, config: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        adapter_of(row).validate_config(config)
    assert CANARY not in str(caught.value), "an error never repeats a secret"
    return caught.value


def test_a_valid_config_is_stored_as_checked(row: Row) -> None:
    config = checked(row)
    assert adapter_of(row).validate_config(config) == config  # stable once checked
    assert set(config) <= {f.name for f in adapter_of(row).spec.fields}


@pytest.mark.parametrize("key", ["secrte", "pasword", "webhook"])
def test_an_unknown_key_is_refused_by_name(row: Row, key: str) -> None:
    config = checked(row)
    if key in config or adapter_of(row).spec.field(key) is not None:
        pytest.skip(f"{key} is a {row.kind} field")
    error = refused(row, config | {key: CANARY})
    assert error.field == f"config.{key}"
    assert "unknown field" in error.message


def test_each_required_field_missing_is_refused_by_name(row: Row) -> None:
    config = checked(row)
    required = [f.name for f in adapter_of(row).spec.fields if f.required]
    assert required, "every kind but the inbox needs some config"
    for name in required:
        error = refused(row, {k: v for k, v in config.items() if k != name})
        assert error.field == f"config.{name}"


def test_each_field_of_the_wrong_type_is_refused_by_name(row: Row) -> None:
    config = checked(row)
    for field in adapter_of(row).spec.fields:
        error = refused(row, config | {field.name: WRONG[field.type]})
        assert error.field.startswith(f"config.{field.name}"), (field.name, error)


def test_secrets_are_redacted_in_reads(row: Row) -> None:
    config = checked(row)
    adapter = adapter_of(row)
    shown = masked_config(adapter.spec, config)
    assert_redacted(adapter, config)
    present = [name for name in adapter.spec.sensitive_fields if name in config]
    assert present, "the example holds a secret"
    for name in present:
        assert MASK in str(shown[name])
    assert CANARY not in str(shown)


# --- sending ------------------------------------------------------------------------------------


class _Reads(dict[str, Any]):
    """A config that remembers which keys were read."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


async def test_every_config_key_an_adapter_reads_is_declared(row: Row, emulator: Any) -> None:
    adapter = adapter_of(row)
    config = _Reads(adapter.validate_config(row.config(emulator)))
    ch = channel(row.kind, config)
    assert isinstance(await send_one(adapter, ch), Delivered)
    adapter.size_limit(ch)
    adapter.secrets_of(ch)
    assert config.read, "the send read its config"
    assert config.read <= {f.name for f in adapter.spec.fields}


async def test_each_kind_of_answer_gives_its_outcome(row: Row, emulator: Any) -> None:
    adapter = adapter_of(row)
    ch = make(row, emulator)
    for name, (arrange, expected) in row.answers.items():
        arrange(emulator)
        outcome = await send_one(adapter, ch)
        assert isinstance(outcome, expected), (name, outcome)
        assert_no_secret(outcome, ch, adapter)
    assert {"delivered", "retry"} <= set(row.answers)


async def test_a_hanging_receiver_is_a_retry(row: Row, emulator: Any) -> None:
    """Sent as the dispatcher sends (its own guard included), the send ends near timeout_s."""
    adapter = adapter_of(row)
    row.hang(emulator, 2.5)
    ch = make(row, emulator, timeout_s=0.5)
    async with HttpClient(allowed_networks=LOOPBACK) as http:
        ctx = SendContext(http=http, store=_NoStore(), attempt_at=_now())
        result = await sending.send(adapter, ctx, ch, _message(adapter, ch), _now)
    outcome = result.outcome
    assert isinstance(outcome, Retry), outcome
    assert row.timeout_reason in (None, outcome.reason)
    assert (result.finished_at - result.started_at).total_seconds() < 2.0


async def test_a_kind_bounded_by_its_request_ends_at_its_timeout_unguarded(
    row: Row, emulator: Any
) -> None:
    """`bounded_by_http_timeout` lets the dispatcher skip a timer of its own per send: the
    adapter promises its send is one request whose own timeout ends it. Held to it here,
    without the dispatcher's guard."""
    adapter = adapter_of(row)
    if not adapter.bounded_by_http_timeout:
        pytest.skip(f"{row.kind} is guarded by the dispatcher")
    row.hang(emulator, 2.5)
    ch = make(row, emulator, timeout_s=0.5)
    async with HttpClient(allowed_networks=LOOPBACK) as http:
        ctx = SendContext(http=http, store=_NoStore(), attempt_at=_now())
        started = _now()
        outcome = await adapter.send(ctx, ch, _message(adapter, ch))
    assert isinstance(outcome, Retry), outcome
    assert (_now() - started).total_seconds() < 1.5


async def test_a_refused_connection_is_a_retry_naming_no_secret(row: Row) -> None:
    if row.kind == "apprise":
        pytest.importorskip("apprise")
    adapter = adapter_of(row)
    ch = channel(row.kind, adapter.validate_config(row.unreachable(closed_port())))
    outcome = await send_one(adapter, ch)
    assert isinstance(outcome, Retry), outcome
    assert row.refused_reason in (None, outcome.reason)
    assert_no_secret(outcome, ch, adapter)


async def test_a_receiver_quoting_the_secrets_gets_them_masked(row: Row, emulator: Any) -> None:
    adapter = adapter_of(row)
    ch = make(row, emulator)
    row.echo(emulator)
    outcome = await send_one(adapter, ch)
    assert not isinstance(outcome, Delivered), outcome
    assert_no_secret(outcome, ch, adapter)
    assert CANARY not in str(outcome)


async def test_a_message_at_the_limit_goes_and_none_exceeds_it(row: Row, emulator: Any) -> None:
    adapter = adapter_of(row)
    ch = make(row, emulator)
    limit = adapter.size_limit(ch)
    assert limit is not None
    line = '数据库磁盘已满 "q" \\ *x* _y_\n'  # multi-byte, JSON-escaped and markup characters
    # As long as an event may be (65,536 characters of body), or ten times the limit.
    huge = event(1, title="db1 disk full", body=line * min(limit // 10 + 1, 65536 // len(line)))
    message = render_single(adapter, ch, Target((1,), message_id="msg_t1"), huge)
    assert message.size <= limit
    if adapter.render(ch, Target((1,), message_id="msg_t1"), [huge]).size > limit:
        assert message.size >= limit // 4, "shortened to the limit, not far below it"
    assert isinstance(await send_one(adapter, ch, message), Delivered)
    (sent,) = row.sent_sizes(emulator)
    assert sent <= message.size, "the vendor's own measure never exceeds the declared one"
    assert "db1 disk full" in row.texts(emulator)[0]


async def test_a_long_digest_is_split_within_the_limit(row: Row, emulator: Any) -> None:
    adapter = adapter_of(row)
    ch = make(row, emulator, mode=Mode.DIGEST)
    limit = adapter.size_limit(ch)
    assert limit is not None
    # A digest lists each event's title: titles of about a twelfth of the limit each.
    per_event = min(max(limit // 12, 100), 60_000)
    filler = "磁盘 x " * (per_event // 5)
    events = [event(i, title=f"host-{i} down {filler}") for i in range(1, 31)]
    messages = assert_within_limit(adapter, ch, events)
    assert len(messages) > 2
    for message in messages[:3]:
        assert isinstance(await send_one(adapter, ch, message), Delivered)
    assert all(size <= limit for size in row.sent_sizes(emulator))


async def test_an_unexpected_exception_is_a_scrubbed_retry_logged_once(
    row: Row, emulator: Any, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_of(row)
    ch = make(row, emulator)
    secrets = adapter.secrets_of(ch)
    assert secrets, "every kind with an emulator has a secret to keep"
    exploding = _Exploding(f"kaboom {' '.join(secrets)} at http://u:{CANARY}@h/?k={CANARY}")
    ctx = SendContext(http=exploding, store=_NoStore(), attempt_at=_now())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="tidings.channels"):
        result = await sending.send(adapter, ctx, ch, _message(adapter, ch), _now)
    outcome = result.outcome
    assert isinstance(outcome, Retry), outcome
    assert outcome.reason is Reason.UNEXPECTED
    assert outcome.error.startswith("RuntimeError: kaboom ")
    assert outcome.provider_response is None, "no traceback in the attempt row"
    assert_no_secret(outcome, ch, adapter)
    (record,) = [r for r in caplog.records if r.name == "tidings.channels"]
    logged = record.getMessage()
    assert record.levelno == logging.WARNING
    assert repr(ch.name) in logged
    assert "Traceback" in logged
    assert CANARY not in logged
    assert all(secret not in logged for secret in secrets)


async def test_end_to_end_through_a_dispatcher(hub: tidings.Hub, row: Row, emulator: Any) -> None:
    adapter = adapter_of(row)
    await hub.channels.create(
        name=f"e2e-{row.kind}",
        kind=row.kind,
        config=adapter.validate_config(row.config(emulator)),
        timeout_s=2,
        retry_backoff_s=0.05,
    )
    async with running(hub):
        await hub.publish(kind="monitor.down", subject="host:db1", title="db1 disk full")
        (delivery,) = await settled(hub, 1)
    assert (delivery.state, delivery.attempts) == (State.SENT, 1)
    (text,) = row.texts(emulator)
    assert "db1 disk full" in text


# --- helpers ------------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _message(adapter: Adapter, ch: Channel) -> Any:
    return adapter.render(ch, Target((1,), message_id="msg_t1"), [event(1)])


class _NoStore:
    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        raise AssertionError("not expected")

    async def inbox_put(self, *args: object) -> None:
        raise AssertionError("not expected")


class _Exploding:
    """An HTTP seam whose every use raises, with the channel's secrets in the message: what an
    adapter meets when a library it calls fails in a way nobody foresaw."""

    def __init__(self, words: str) -> None:
        self.words = words

    @property
    def allowed_networks(self) -> tuple[Any, ...]:
        raise RuntimeError(self.words)

    async def post(self, url: str, **_: Any) -> Outcome:
        raise RuntimeError(self.words)
