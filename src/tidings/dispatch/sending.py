"""One send: render to fit, call the adapter, time it, and never let an exception escape.

An adapter that raises (a bug, an unexpected library error) produces a retry whose attempt
row names the exception, scrubbed of the channel's secrets; its traceback goes to the log.
An adapter that ignores its timeout is cut off a little later (one whose send is a single
HTTP request is bounded by that request's own timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.failure import unexpected_failure
from tidings.core.digest import fitting_prefix
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome, Reason, Reject, Retry
from tidings.dispatch.report import SendResult
from tidings.render import remembering_entries

#: Extra time past the channel's timeout before an adapter that ignores it is cut off.
TIMEOUT_GRACE_S = 5.0
#: The attempt row of a send cut short by a shutdown (W3).
INTERRUPTED_ERROR = (
    "the worker stopped before the answer came (shutdown); the receiver may have the message"
)


def render_single(adapter: Adapter, channel: Channel, target: Target, event: Event) -> Message:
    """A single event, shortened with a visible marker when it exceeds the channel's limit."""
    message = adapter.render(channel, target, [event])
    limit = adapter.size_limit(channel)
    if limit is not None and message.size > limit:
        message = adapter.render(channel, target, [event], shorten_to=limit)
    return message


#: A digest entry: its delivery id and that delivery's message id (N1).
Entry = tuple[int, str]


def plan_digest(
    adapter: Adapter,
    channel: Channel,
    batch_id: int,
    ids: Sequence[Entry],
    events: Sequence[Event],
) -> list[Message]:
    """D5: cut a digest into messages within the channel's limit, at entry boundaries, oldest
    entries first, numbered part i of n. An entry too long on its own is shortened, never
    dropped. Sizes are measured with the widest numbering, so the final labels still fit.
    `ids` are the entries (delivery id, message id) in the order of `events`."""
    with remembering_entries():
        return _plan(adapter, channel, batch_id, ids, events)


def _plan(
    adapter: Adapter, channel: Channel, batch_id: int, ids: Sequence[Entry], events: Sequence[Event]
) -> list[Message]:
    limit = adapter.size_limit(channel)
    widest = len(ids)
    cuts: list[tuple[int, int]] = []
    start = 0
    while start < len(ids):

        def fits(n: int, at: int = start) -> bool:
            target = Target.digest(batch_id, ids[at : at + n])
            message = adapter.render(
                channel, target, events[at : at + n], part=widest, parts=widest
            )
            return limit is None or message.size <= limit

        count = fitting_prefix(len(ids) - start, fits)
        cuts.append((start, max(count, 1)))
        start += max(count, 1)
    parts = len(cuts)
    return [
        _segment(adapter, channel, batch_id, ids, events, at, n, part, parts, limit)
        for part, (at, n) in enumerate(cuts, start=1)
    ]


def _segment(
    adapter: Adapter,
    channel: Channel,
    batch_id: int,
    ids: Sequence[Entry],
    events: Sequence[Event],
    at: int,
    n: int,
    part: int,
    parts: int,
    limit: int | None,
) -> Message:
    target = Target.digest(batch_id, ids[at : at + n])
    message = adapter.render(channel, target, events[at : at + n], part=part, parts=parts)
    if limit is not None and message.size > limit:  # a single over-long entry
        message = adapter.render(
            channel, target, events[at : at + n], shorten_to=limit, part=part, parts=parts
        )
    return message


def render_failed(
    ids: Sequence[int], batch_id: int | None, error: Exception, clock: Callable[[], datetime]
) -> SendResult:
    """A message that cannot be rendered (a broken template override) fails permanently:
    retrying renders the same template again. The operator fixes it and resends."""
    now = clock()
    outcome = Reject(Reason.CLIENT_ERROR, f"cannot render the message: {error}")
    return SendResult(tuple(ids), outcome, now, now, batch_id)


def interrupted(
    ids: Sequence[int], batch_id: int | None, started: datetime, clock: Callable[[], datetime]
) -> SendResult:
    """A send still waiting for its answer when the grace period ended (W3). It may have
    reached the receiver, so it is an attempt like one that timed out: audited, counted and
    retried, never given back as if it had not been made."""
    outcome = Retry(Reason.INTERRUPTED, INTERRUPTED_ERROR)
    return SendResult(tuple(ids), outcome, started, clock(), batch_id)


async def send(
    adapter: Adapter,
    ctx: SendContext,
    channel: Channel,
    message: Message,
    clock: Callable[[], datetime],
) -> SendResult:
    started = ctx.attempt_at  # read just before, by whoever made the context
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
        declared = adapter.spec.limit
        unit = declared.unit.value if declared is not None else "units"
        return Reject(
            Reason.TOO_LARGE,
            f"message of {message.size} {unit} could not be shortened below the limit of {limit}",
        )
    try:
        if adapter.bounded_by_http_timeout:
            return await adapter.send(ctx, channel, message)
        # asyncio.timeout, unlike wait_for on 3.11, runs the send without a task of its own.
        async with asyncio.timeout(channel.timeout_s + TIMEOUT_GRACE_S):
            return await adapter.send(ctx, channel, message)
    except TimeoutError:
        return Retry(Reason.TIMEOUT, f"no answer within {channel.timeout_s:g} s")
    except Exception as error:  # a bug in the adapter: logged, never in the attempt row
        return unexpected_failure(error, channel=channel.name, secrets=adapter.secrets_of(channel))
