"""Declarative channels (`tidings apply`): the plan that makes the stored channels match a
channels file — create, update (with the fields that change), unchanged, and with `prune`
disable the ones the file leaves out — and applying it in one transaction.

Every channel of the file passes ChannelRules, as on every other path, before anything is
written: a file with one bad channel changes nothing. Service level: imports the Hub, its
ChannelRules, tidings.channel_file and tidings.core.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tidings import channel_file
from tidings.channel_rules import ChannelRules, changed_fields
from tidings.core.errors import ValidationError
from tidings.core.model import Channel, ChannelSpec
from tidings.core.redact import mask, scrub
from tidings.hub import Hub

#: Why a pruned channel is disabled (its disabled_reason).
PRUNED = "not in the channels file applied with --prune"
#: How much of a value a plan shows.
SHOWN_CHARS = 60


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    PRUNE = "prune"


@dataclass(frozen=True, slots=True)
class Change:
    """One field a step changes, its values as a plan may show them (secrets masked)."""

    field: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class Step:
    action: Action
    name: str
    kind: str
    changes: tuple[Change, ...] = ()
    #: What the channel is to be (create, update).
    spec: ChannelSpec | None = None
    #: The stored channel (update, unchanged, prune).
    channel_id: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    steps: tuple[Step, ...]

    def count(self, action: Action) -> int:
        return sum(step.action is action for step in self.steps)

    @property
    def changes_anything(self) -> bool:
        return any(step.action is not Action.UNCHANGED for step in self.steps)


def plan(
    declared: Sequence[channel_file.Declared],
    stored: Sequence[Channel],
    rules: ChannelRules,
    secret_fields: Mapping[str, tuple[str, ...]],
    *,
    prune: bool,
) -> Plan:
    """The steps that make `stored` match `declared`; a channel that fails the rules raises
    FileError naming its line and field, before anything is written."""
    by_name = {channel.name: channel for channel in stored}
    steps = [_step(item, by_name.get(item.name), rules, secret_fields) for item in declared]
    if prune:
        named = {item.name for item in declared}
        steps += [
            Step(Action.PRUNE, c.name, c.kind, channel_id=c.id)
            for c in stored
            if c.name not in named and c.enabled
        ]
    return Plan(tuple(steps))


def _step(
    item: channel_file.Declared,
    current: Channel | None,
    rules: ChannelRules,
    secret_fields: Mapping[str, tuple[str, ...]],
) -> Step:
    try:
        spec = rules.desired(item.fields, current)
    except ValidationError as error:
        raise item.error(error) from None
    secrets = secret_fields.get(spec.kind, ())
    if current is None:
        empty = ChannelSpec(name=spec.name, kind=spec.kind)
        shown = _changes(empty, spec, secrets, changed_fields(empty, spec))
        return Step(Action.CREATE, spec.name, spec.kind, shown, spec)
    names = changed_fields(current.spec(), spec)
    if not names:
        return Step(Action.UNCHANGED, spec.name, spec.kind, channel_id=current.id)
    shown = _changes(current.spec(), spec, secrets, names)
    return Step(Action.UPDATE, spec.name, spec.kind, shown, spec, current.id)


def _changes(
    old: ChannelSpec, new: ChannelSpec, secrets: tuple[str, ...], names: list[str]
) -> tuple[Change, ...]:
    return tuple(
        Change(name, _shown(_get(old, name), name, secrets), _shown(_get(new, name), name, secrets))
        for name in names
    )


def _get(spec: ChannelSpec, name: str) -> Any:
    top, _, key = name.partition(".")
    value = getattr(spec, top)
    return value.get(key) if key else value


def _shown(value: Any, name: str, secrets: tuple[str, ...]) -> str:
    """A value as a plan shows it: a secret masked, URLs without their credentials, cut."""
    if value is None:
        return "—"
    top, _, key = name.partition(".")
    if top == "config" and key in secrets:
        return mask(value) if isinstance(value, str) else "••••"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = scrub(text)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


async def apply(hub: Hub, steps: Plan) -> None:
    """Every step in one transaction: all of them happen, or none."""
    creates = [s.spec for s in steps.steps if s.action is Action.CREATE and s.spec]
    updates = [
        (s.channel_id, s.spec)
        for s in steps.steps
        if s.action is Action.UPDATE and s.spec and s.channel_id is not None
    ]
    prunes = [s.channel_id for s in steps.steps if s.action is Action.PRUNE and s.channel_id]
    await hub.store.apply_channels(creates, updates, prunes, PRUNED)
