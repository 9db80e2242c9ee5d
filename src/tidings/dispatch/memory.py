"""What a dispatcher remembers between claims, so the store need not: the events it has seen."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from tidings.core.model import Claim, Event

#: Events a dispatcher keeps from its claims (an event published to many channels is claimed
#: by each of them; 4,096 events of a few KiB are a few MiB).
EVENTS_REMEMBERED = 4096


class EventMemory:
    """The events of recent claims, by id: events are immutable (E3), so a claim reads only
    the events its dispatcher has not seen — an event fanned out to many channels is read and
    decoded once, not once per channel."""

    def __init__(self, size: int = EVENTS_REMEMBERED) -> None:
        self._size = size
        self._events: OrderedDict[int, Event] = OrderedDict()

    @property
    def known(self) -> Mapping[int, Event]:
        return self._events

    def remember(self, claim: Claim | None) -> None:
        if claim is None:
            return
        for item in claim.items:
            self._events[item.event.id] = item.event
            self._events.move_to_end(item.event.id)
        while len(self._events) > self._size:
            self._events.popitem(last=False)
