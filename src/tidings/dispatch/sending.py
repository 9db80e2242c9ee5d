"""One send: render to fit, call the adapter, time it, and never let an exception escape.

An adapter that raises (a bug, an unexpected library error) produces a retry whose attempt
row carries the traceback; an adapter that ignores its timeout is cut off a little later.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.core.digest import fitting_prefix
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome, Reason, Reject, Retry
from tidings.dispatch.report import SendResult

#: Extra time past the channel's timeout before an adapter that ignores it is cut off.
TIMEOUT_GRACE_S = 5.0


def render_single(adapter: Adapter, channel: Channel, target: Target, event: Event) -> Message:
    """A single event, shortened with a visible marker when it exceeds the channel's limit."""
    message = adapter.render(channel, target, [event])
    limit = adapter.size_limit(channel)
    if limit is not None and message.size > limit:
        message = adapter.render(channel, target, [event], shorten_to=limit)
    return message


def render_segment(
    adapter: Adapter, channel: Channel, batch_id: int, ids: Sequence[int], events: Sequence[Event]
) -> Message:
    """D5: the first message of a digest: as many entries as fit, at least one (shortened)."""
    limit = adapter.size_limit(channel)

    def render(n: int) -> Message:
        return adapter.render(channel, Target(tuple(ids[:n]), batch_id), events[:n])

    if limit is None:
        return render(len(ids))
    count = fitting_prefix(len(ids), lambda n: render(n).size <= limit)
    if count == 0:
        target = Target(tuple(ids[:1]), batch_id)
        return adapter.render(channel, target, events[:1], shorten_to=limit)
    return render(count)


async def send(
    adapter: Adapter,
    ctx: SendContext,
    channel: Channel,
    message: Message,
    clock: Callable[[], datetime],
) -> SendResult:
    started = clock()
    outcome = await _guarded(adapter, ctx, channel, message)
    return SendResult(
        ids=message.target.delivery_ids,
        outcome=outcome,
        started_at=started,
        finished_at=clock(),
        batch_id=message.target.batch_id,
    )


async def _guarded(
    adapter: Adapter, ctx: SendContext, channel: Channel, message: Message
) -> Outcome:
    limit = adapter.size_limit(channel)
    if limit is not None and message.size > limit:
        return Reject(
            Reason.TOO_LARGE,
            f"message of {message.size} {adapter.limits.size_unit} could not be shortened "
            f"below the limit of {limit}",
        )
    try:
        return await asyncio.wait_for(
            adapter.send(ctx, channel, message), timeout=channel.timeout_s + TIMEOUT_GRACE_S
        )
    except TimeoutError:
        return Retry(Reason.TIMEOUT, f"no answer within {channel.timeout_s:g} s")
    except Exception as error:
        return Retry(
            Reason.UNEXPECTED,
            f"{type(error).__name__}: {error}",
            provider_response="".join(traceback.format_exception(error)),
        )
