"""Which channels each new event goes to, and in what state its deliveries start (E1).

A `Fanout` is built once from the channels a publish plans with, and then answers each
event by asking only the channels that could take it: a channel of another tenant never
could, nor one whose every kind pattern starts with text the event's kind does not. With
ten thousand channels, asking every channel about every event cost a single publish 30–40
ms of CPU; an event now asks its own tenant's channels, the channels whose patterns' fixed
beginnings its kind starts with, and those whose filter cannot be told apart that way (a
pattern that starts with a wildcard, a filter of severity or labels only). The answer is
the channels' own order, as asking each in turn gave it.

Pure: imports only the standard library and tidings.core.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidings.core import filters
from tidings.core.filters import Routed
from tidings.core.states import TRANSITIONS, SkipReason, State

#: A new delivery's state, and why it was skipped (a disabled channel), by channel.
Initial = tuple[State, SkipReason | None]
#: What makes a kind pattern's character a wildcard (`fnmatch`).
_WILDCARD = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Route:
    """What a fan-out reads of a channel (`Routed`), all a publisher keeps of each one:
    reading and decoding whole channels (their config and templates too) took two thirds
    of a publisher's re-read of ten thousand after a change."""

    id: int
    enabled: bool
    tenant: str | None
    filter: dict[str, Any]


def initial_state(channel: Routed) -> Initial:
    if channel.enabled:
        return TRANSITIONS["publish"].target, None
    return TRANSITIONS["publish_skipped"].target, SkipReason.CHANNEL_DISABLED


class Fanout:
    def __init__(self, channels: Sequence[Routed]) -> None:
        #: The channels it was built from, in their order.
        self.channels = channels
        #: Each channel's initial delivery state, by id.
        self.initial: dict[int, Initial] = {c.id: initial_state(c) for c in channels}
        #: The same as the text a row stores: (state, skip reason or None).
        self.initial_text: dict[int, tuple[str, str | None]] = {
            i: (state.value, None if skip is None else skip.value)
            for i, (state, skip) in self.initial.items()
        }
        #: (position, channel) of the channels without a tenant that take every event, of
        #: those without a tenant that filter, and of each tenant's.
        self._every: list[tuple[int, Routed]] = []
        self._filtering: list[tuple[int, Routed]] = []
        self._by_tenant: dict[str, list[tuple[int, Routed]]] = {}
        #: Channels without a tenant by the fixed beginnings of their kind patterns, and
        #: the lengths of those beginnings.
        self._by_prefix: dict[str, list[tuple[int, Routed]]] = {}
        for at, channel in enumerate(channels):
            if channel.tenant is not None:
                self._by_tenant.setdefault(channel.tenant, []).append((at, channel))
            elif filters.takes_every_event(channel.filter, None):
                self._every.append((at, channel))
            elif prefixes := _fixed_beginnings(channel.filter.get("kinds")):
                for prefix in prefixes:
                    self._by_prefix.setdefault(prefix, []).append((at, channel))
            else:
                self._filtering.append((at, channel))
        self._prefix_lengths = sorted({len(p) for p in self._by_prefix})
        self._every_channel = [c for _, c in self._every]

    def channels_for(self, event: filters.Routable) -> list[Routed]:
        """The channels `event` goes to, in the channels' order."""
        own = self._by_tenant.get(event.tenant, ()) if event.tenant is not None else ()
        by_kind = self._by_kind(event.kind)
        if not own and not self._filtering and not by_kind:
            return self._every_channel
        matched = [(at, c) for at, c in own if filters.channel_takes(c, event)]
        matched += [(at, c) for at, c in self._filtering if filters.channel_takes(c, event)]
        matched += [(at, c) for at, c in by_kind.items() if filters.channel_takes(c, event)]
        if not matched:
            return self._every_channel
        matched.sort(key=_position)
        if self._every:
            matched = list(heapq.merge(self._every, matched, key=_position))
        return [c for _, c in matched]

    def _by_kind(self, kind: str) -> dict[int, Routed]:
        """The channels with a pattern whose fixed beginning `kind` starts with, by
        position (a channel with two such patterns once)."""
        found: dict[int, Routed] = {}
        for length in self._prefix_lengths:
            if length > len(kind):
                break
            for at, channel in self._by_prefix.get(kind[:length], ()):
                found[at] = channel
        return found


def _fixed_beginnings(patterns: object) -> set[str]:
    """The text before the first wildcard of each pattern; empty when there are no patterns
    or one starts with a wildcard (it may match a kind that starts with anything)."""
    if not isinstance(patterns, list) or not patterns:
        return set()
    beginnings = set()
    for pattern in patterns:
        wildcard = _WILDCARD.search(pattern)
        beginning = pattern if wildcard is None else pattern[: wildcard.start()]
        if not beginning:
            return set()
        beginnings.add(beginning)
    return beginnings


def _position(entry: tuple[int, Routed]) -> int:
    return entry[0]
