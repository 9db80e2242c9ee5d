"""The dispatcher's lifecycle: check the lease (C5), find due channels, run their jobs, sleep
until new work or the next due time, and shut down gracefully (W3).

One dispatcher per process; any number of them share one database (W1).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Network, IPv6Network

from tidings import tracing
from tidings.channels.base import SendContext
from tidings.channels.http import HttpClient
from tidings.channels.registry import Registry
from tidings.core.breaker import Policy
from tidings.core.clock import SYSTEM_CLOCK, Clock
from tidings.core.errors import ConfigError, StoreError
from tidings.core.model import Channel
from tidings.core.redact import scrub, scrub_text
from tidings.core.states import Mode
from tidings.dispatch import handed
from tidings.dispatch.digest import run_digest
from tidings.dispatch.gate import ClaimGate
from tidings.dispatch.jobs import CLAIMS_AHEAD, JobContext
from tidings.dispatch.memory import EventMemory
from tidings.dispatch.realtime import run_realtime
from tidings.dispatch.repeats import RepeatedFailures
from tidings.dispatch.retention import Purger
from tidings.dispatch.slots import SendSlots
from tidings.dispatch.wakeup import Wakeup
from tidings.metrics import Metrics
from tidings.store import Store
from tidings.store.handoff import HandOff
from tidings.store.notify import Hint, LocalNotifier

log = logging.getLogger("tidings.dispatch")

#: C5: a lease must outlast the slowest send this many times over.
LEASE_TIMEOUT_FACTOR = 4
#: How long a channel rests after its job failed, at most (a poll interval may be long).
FAILED_JOB_REST_S = 1.0
#: How often a channel's job failing again the same way is logged once more.
SAME_FAILURE_EVERY_S = 60.0
#: Channel jobs one dispatcher runs at once. Due channels beyond it wait their turn in the
#: order a look found them; a channel a wake-up names starts at once, whatever runs. Jobs
#: under a cap end together (their sends share the slots in turn) and the waiting ones then
#: start with empty pipelines: at 64, a hundred busy channels drained at 0.66 × raw against
#: 0.73 × with no cap, so the cap is kept for the thousands.
JOBS_AT_ONCE = 256
#: After a job ends, a dispatcher looks for due channels at most this often: with many
#: quiet channels, each job's end asking anew kept the loop (and the database) busy with
#: looks while wake-ups waited for it. New work wakes it at once anyway; this only delays
#: rows falling due without an announcement (a retry's backoff) by as much.
LOOK_AFTER_JOB_S = 0.1
#: Due channels waiting their turn start together, this many at once (or all that wait)
#: once as many job places are free: their claims then go in one statement. Started one
#: by one as jobs ended, ten thousand small channels' claims went ~7 to a statement, and
#: the dispatcher and the database spent ~8 % more a delivery on the statements.
START_TOGETHER = 32
#: ... but a free place waits for the others at most this long: a few long jobs (backlogs)
#: may hold the other places for minutes.
START_TOGETHER_WAIT_S = 0.05


@dataclass(frozen=True)
class DispatcherConfig:
    worker_id: str
    lease_s: float = 120.0
    poll_interval_s: float = 1.0
    #: Sends in flight at once, across all channels.
    concurrency: int = 50
    #: Rows one realtime claim may take (never more than the channel's rate budget).
    claim_size: int = 500
    #: W3: how long in-flight sends may finish after a stop before they are given back.
    grace_s: float = 20.0
    allowed_networks: tuple[IPv4Network | IPv6Network, ...] = field(default_factory=tuple)
    #: H1: when a failing channel's breaker opens, and when the channel is disabled.
    breaker: Policy = field(default_factory=Policy)
    #: R1: days ended rows are kept (0: keep everything), and where to archive them first.
    retention_days: float = 30.0
    retention_archive_dir: str | None = None
    #: PostgreSQL: wait for hand-offs (`tidings.store.handoff`), so that a single publish
    #: leases its rows to this dispatcher and it sends them without a claim.
    handoffs: bool = True


def check_lease(lease_s: float, largest_timeout: tuple[float, str] | None) -> None:
    """C5: refuse a lease that a slow send could outlive (two workers would send one row)."""
    if largest_timeout is None:
        return
    timeout_s, name = largest_timeout
    if lease_s < LEASE_TIMEOUT_FACTOR * timeout_s:
        raise ConfigError(
            f"lease of {lease_s:g} s is shorter than {LEASE_TIMEOUT_FACTOR} × the largest "
            f"channel timeout_s ({timeout_s:g} s on channel {name!r}); set TIDINGS_LEASE_S to "
            f"at least {LEASE_TIMEOUT_FACTOR * timeout_s:g} or lower that channel's timeout_s"
        )


class Dispatcher:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        config: DispatcherConfig,
        *,
        rand: Callable[[], float] = random.random,
        metrics: Metrics | None = None,
        notifier: LocalNotifier | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`notifier`: the in-process wake-ups of the store's process (a Hub's `notifier`);
        without it only LISTEN/NOTIFY (PostgreSQL) and polling wake this dispatcher."""
        self.metrics = metrics
        self._notifier = notifier
        self._clock = clock
        self.store = store
        self.registry = registry
        self.config = config
        self._rand = rand
        self._stopping = asyncio.Event()
        #: Set while the dispatcher waits for work with no job running (nothing due, or all
        #: of it resting): an embedding program, or a test, can await it.
        self.idle = asyncio.Event()
        self._jobs: dict[int, asyncio.Task[bool]] = {}
        #: Sends of what publishes handed over (`tidings.dispatch.handed`), with their rows.
        self._handing: dict[asyncio.Task[None], int] = {}
        self._handed_rows = 0
        #: Handed rows in flight at which the dispatcher leaves its seat for now.
        self._busy_rows = max(1, config.concurrency // 2)
        self._seated = True
        self._seat_changes: set[asyncio.Task[None]] = set()
        #: True while the loop sleeps (waits for work).
        self._sleeping = False
        #: Set when a job ends, so the loop looks again (it rings the wake-up, once however
        #: many jobs end).
        self._job_ended = False
        # While running: what the loop sleeps on, rung by a job's end and by a stop too.
        self._wakeup: Wakeup | None = None
        self._resting: dict[int, float] = {}  # channel id -> monotonic time to look again
        # A run of the same job failure is said once a minute, not once a poll.
        self._failures = RepeatedFailures(SAME_FAILURE_EVERY_S, clock.monotonic)
        # Realtime channels seen due (a claim reloads the channel, so staleness is harmless).
        self._realtime: dict[int, Channel] = {}
        # The last answer's due channels, by id: the store answers an unchanged one from here
        # rather than decoding it again.
        self._due_before: dict[int, Channel] = {}
        # Due channels a look found that wait for a job, in the order to start them: while
        # any wait, a job's end starts the next one instead of looking again (with ten
        # thousand due channels, a look per job end costs as much as the jobs).
        self._waiting: dict[int, Channel] = {}
        self._looked_at = float("-inf")  # monotonic
        # Set by `_sleep` when it woke only because a job ended, and a look was put off.
        self._only_ended = False
        self._look_put_off = False
        # When channels waiting their turn start even if fewer than START_TOGETHER job
        # places are free (None: no place waits for others).
        self._start_by: float | None = None
        # Channels a wake-up named while their job ran (`_again`), started again as soon
        # as it ends (`_named`), ahead of the channels waiting their turn.
        self._again: set[int] = set()
        self._named: dict[int, Channel] = {}
        # A look for due channels asked beside running jobs, until its answer is taken; and
        # whether another was wanted meanwhile (a wake-up named a channel not yet known).
        self._look: asyncio.Future[list[Channel]] | None = None
        self._look_again = False
        self._reruns: dict[int, asyncio.Task[bool]] = {}

    def stop(self) -> None:
        """Stop claiming; in-flight sends get the grace period (W3). Safe from signal handlers."""
        self._stopping.set()
        if self._wakeup is not None:
            self._wakeup.ring()

    async def run(self) -> None:
        check_lease(self.config.lease_s, await self.store.largest_timeout())
        async with HttpClient(allowed_networks=self.config.allowed_networks) as http:
            wakeup = self._wakeup = Wakeup(self.store, self._notifier)
            purger = Purger(
                self.store,
                self.config.retention_days,
                self.config.retention_archive_dir,
                self.metrics,
                # Before its first look a dispatcher does not know yet: taken as busy.
                delivering=lambda: bool(self._jobs) or self._looked_at == float("-inf"),
            )
            purging = asyncio.create_task(purger.run(self._stopping), name="tidings-retention")
            try:
                await wakeup.start()
                # The first event is sent as fast as the next (`Store.warm`), with
                # OpenTelemetry (when installed) imported now rather than on its path.
                await self.store.warm(dispatch=True)
                tracing.active()
                await self._loop(http, wakeup)
            finally:
                await self._shutdown()
                self._wakeup = None
                await wakeup.close()
                if self._handing:  # handed between the seat's end and the connection's
                    await asyncio.wait(list(self._handing), timeout=self.config.grace_s)
                purging.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await purging
        log.info("dispatcher %s stopped", self.config.worker_id)

    async def _loop(self, http: HttpClient, wakeup: Wakeup) -> None:
        ctx = JobContext(
            store=self.store,
            registry=self.registry,
            send_context=lambda traceparent=None, at=None: SendContext(
                http=http,
                store=self.store,
                attempt_at=self._clock.now() if at is None else at,
                traceparent=traceparent,
            ),
            slots=SendSlots(self.config.concurrency),
            lanes=self.config.concurrency,
            # Rows leased ahead of the sends, across every channel of this dispatcher.
            gate=ClaimGate(ahead=CLAIMS_AHEAD * self.config.claim_size),
            worker_id=self.config.worker_id,
            lease_s=self.config.lease_s,
            claim_size=self.config.claim_size,
            rand=self._rand,
            breaker=self.config.breaker,
            clock=self._clock,
            events=EventMemory(),
            stopping=self._stopping,
            metrics=self.metrics,
        )
        log.info("dispatcher %s started on %s", self.config.worker_id, self.store.backend)
        hint: Hint = None
        wakeup.on_news = functools.partial(self._start_named, ctx)
        self._seated = True
        if self.config.handoffs:
            await wakeup.take_seat(
                self.config.worker_id, self.config.lease_s, functools.partial(self._handed, ctx)
            )
        try:
            while not self._stopping.is_set():
                try:
                    await self._start_jobs(ctx, hint)
                    hint = None  # should the sleep fail, look at every channel next
                    hint = await self._sleep(wakeup)
                except StoreError as error:
                    # The database restarted or is unreachable: pooled connections are
                    # dropped on the first error, so wait a poll interval and look again.
                    log.warning("dispatcher %s: %s; retrying", self.config.worker_id, error)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), self.config.poll_interval_s)
        finally:
            wakeup.on_news = None

    def _handed(self, ctx: JobContext, found: HandOff, late_s: float) -> None:
        """Send what a publish handed over (`tidings.dispatch.handed`), in a task of its own,
        started in the turn of the loop the notification was read in."""
        heard_at = self._clock.monotonic()
        sending = handed.send(ctx, found, heard_at, late_s, self._realtime)
        task = asyncio.create_task(sending, name="handed")
        self._handing[task] = len(found.rows)
        task.add_done_callback(self._handed_done)
        self.idle.clear()
        self._handed_rows += len(found.rows)
        if self._seated and self._handed_rows >= self._busy_rows:
            self._seat_wanted(False)

    def _seat_wanted(self, wanted: bool) -> None:
        """A busy dispatcher leaves its seat, so that publishes hand their rows to another
        that waits, or leave them to the claims (W1: rows spread over the dispatchers);
        it takes one again once its hand-offs are few."""
        self._seated = wanted
        if self._wakeup is not None and not self._stopping.is_set():
            task = asyncio.create_task(self._wakeup.seat_wanted(wanted), name="seat")
            self._seat_changes.add(task)
            task.add_done_callback(self._seat_changes.discard)

    def _handed_done(self, task: asyncio.Task[None]) -> None:
        self._handed_rows -= self._handing.pop(task, 0)
        if not self._seated and self._handed_rows <= self._busy_rows // 4:
            self._seat_wanted(True)
        if not task.cancelled() and (error := task.exception()) is not None:
            # Its rows wait out their lease, then go to the claims (C2); said once a run.
            cause = " ".join(scrub(f"{type(error).__name__}: {error}").split())
            held_back = self._failures.failed("handed", cause)
            if held_back is not None:
                more = f" (and {held_back} more times since it was last said)" if held_back else ""
                log.error("sending a hand-off failed: %.300s%s", cause, more)
        if self._sleeping and not self._jobs and not self._handing:
            self.idle.set()

    def _start_named(self, ctx: JobContext, hint: frozenset[int]) -> frozenset[int]:
        """Start the jobs of the known realtime channels a wake-up names, in the turn of the
        loop the news came in (a channel whose job runs starts again when it ends); answer
        the channels left for the loop, which looks for them. An idle dispatcher's claim
        then goes out without its loop's wake-up, bookkeeping and turn between: on an idle
        2-core machine the notification until the claim took 0.21–0.24 ms over the bare
        pipeline's, against 0.27–0.32 ms."""
        if self._stopping.is_set():
            return hint
        unknown = hint - self._realtime.keys()
        known = hint - unknown
        # The one job of an idle dispatcher claims at once, not a turn later for company.
        alone = len(known) == 1 and not self._jobs
        for channel_id in sorted(known):
            self._resting.pop(channel_id, None)
            if channel_id in self._jobs:
                self._again.add(channel_id)
            else:
                self._start(ctx, self._realtime[channel_id], alone=alone)
                self.idle.clear()
        return unknown

    async def _start_jobs(self, ctx: JobContext, hint: Hint) -> None:
        """Start jobs for due channels without one. Woken for known realtime channels, claim
        for them at once, ahead of any channel waiting its turn: asking which channels are
        due would only delay the send (and `_sleep` still wakes for anything else that
        falls due). Otherwise look again only once every channel found by the last look has
        started, or the poll interval has passed since it."""
        now = self._clock.monotonic()
        named, self._named = self._named, {}
        for channel in named.values():
            if channel.id not in self._jobs:
                self._reruns[channel.id] = self._start(ctx, channel)
        # The wake-up itself starts the known channels' jobs (`_start_named`); it leaves
        # the loop those it did not know then, some of which a look may have found since.
        unknown = None if hint is None else self._start_named(ctx, hint)
        if unknown is not None and not unknown:
            pass  # every channel named has its job: nothing to look for
        elif self._look is not None:
            # A wake-up named a channel not yet known: look again once the look under way
            # (which may have begun before the news) has answered.
            self._look_again = self._look_again or unknown is not None
        elif self._should_look(now):
            await self._begin_look(now)
        if self._look is not None and self._look.done():
            look, self._look = self._look, None
            self._found(look.result())  # its error, if any, is the loop's (StoreError)
            if self._look_again:
                self._look_again = False
                await self._begin_look(now)
        self._start_waiting(ctx)

    async def _begin_look(self, now: float) -> None:
        """Ask which channels are due. While jobs run it is asked beside them and answered
        by a ring of the wake-up: under load the question takes tens of milliseconds, and
        wake-ups that came meanwhile would wait for it before their jobs could start."""
        self._looked_at = now
        self._look_put_off = False
        look = asyncio.ensure_future(self.store.due_channels(self._due_before))
        if not self._jobs or self._wakeup is None:
            self._found(await look)
            return
        self._look = look
        look.add_done_callback(self._looked)

    def _looked(self, _look: asyncio.Future[list[Channel]]) -> None:
        if self._wakeup is not None:
            self._wakeup.ring()

    def _found(self, channels: list[Channel]) -> None:
        self._due_before = {c.id: c for c in channels}
        self._realtime.update((c.id, c) for c in channels if c.mode is Mode.REALTIME)
        self._waiting.update((c.id, c) for c in channels if c.id not in self._jobs)

    def _should_look(self, now: float) -> bool:
        since = now - self._looked_at
        if since >= self.config.poll_interval_s:
            # A channel a look finds now would start behind every channel already waiting:
            # while a full round of jobs waits, the look waits too. With ten thousand due
            # channels, a look a poll interval found them all again each time, for ~4 % of
            # the dispatcher's CPU and a busy database.
            return len(self._waiting) < JOBS_AT_ONCE
        if self._waiting:
            return False
        if self._only_ended and since < LOOK_AFTER_JOB_S:
            self._look_put_off = True
            return False
        return True

    def _start_waiting(self, ctx: JobContext) -> None:
        now = self._clock.monotonic()
        free = JOBS_AT_ONCE - len(self._jobs)
        if not self._waiting or free <= 0:
            self._start_by = None
            return
        if free < min(START_TOGETHER, len(self._waiting)):
            if self._start_by is None:
                self._start_by = now + START_TOGETHER_WAIT_S
            if now < self._start_by:
                return  # `_sleep` wakes by then
        self._start_by = None
        while self._waiting and len(self._jobs) < JOBS_AT_ONCE:
            channel_id = next(iter(self._waiting))  # the first in turn, without a copy
            channel = self._waiting.pop(channel_id)
            if channel_id not in self._jobs and self._resting.get(channel_id, 0.0) <= now:
                self._start(ctx, channel)

    def _start(
        self, ctx: JobContext, channel: Channel, *, alone: bool = False
    ) -> asyncio.Task[bool]:
        self._waiting.pop(channel.id, None)
        if channel.mode is Mode.REALTIME:
            job = run_realtime(ctx, channel, alone=alone)
        else:
            job = run_digest(ctx, channel)
        task = asyncio.create_task(job, name=f"channel-{channel.id}")
        task.add_done_callback(functools.partial(self._job_done, channel))
        self._jobs[channel.id] = task
        return task

    def _secrets_of(self, channel: Channel) -> list[str]:
        if channel.kind not in self.registry:
            return []
        return self.registry.get(channel.kind).secrets_of(channel)

    def _job_done(self, channel: Channel, task: asyncio.Task[bool]) -> None:
        self._jobs.pop(channel.id, None)
        if not self._job_ended and self._wakeup is not None:
            self._wakeup.ring()
        self._job_ended = True
        again = channel.id in self._again
        if again:  # named by a wake-up while it ran: it starts again at once
            self._again.discard(channel.id)
            self._named[channel.id] = channel
        # A job started again that found nothing took what the wake-up announced in the job
        # before: no reason to rest (a rest could outlast a retry's backoff).
        rerun = self._reruns.pop(channel.id, None) is task
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            # One line with the cause, scrubbed of URLs' credentials and the channel's secrets
            # (S2); the traceback, scrubbed too, at debug.
            secrets = self._secrets_of(channel)
            cause = " ".join(scrub_text(scrub(f"{type(error).__name__}: {error}"), secrets).split())
            held_back = self._failures.failed(channel.id, cause)
            if held_back is not None:
                more = f" (and {held_back} more times since it was last said)" if held_back else ""
                log.error("channel %r job failed: %.300s%s", channel.name, cause, more)
            if log.isEnabledFor(logging.DEBUG):
                lines = "".join(traceback.format_exception(error))
                log.debug("channel %r job failed\n%s", channel.name, scrub_text(lines, secrets))
        elif failures := self._failures.succeeded(channel.id):
            log.info("channel %r: jobs run again after %d failed", channel.name, failures)
        if error is not None or not (again or rerun or task.result()):
            # Due rows but nothing leased: no rate budget, a digest not yet due, or rows held
            # by another worker. Let the channel rest instead of asking again at once.
            rest = self._rest_s(channel, failed=error is not None)
            self._resting[channel.id] = self._clock.monotonic() + rest

    def _rest_s(self, channel: Channel, failed: bool) -> float:
        if failed:  # the database was away, or a send path broke: look again soon
            return min(self.config.poll_interval_s, FAILED_JOB_REST_S)
        if channel.mode is Mode.REALTIME and channel.rate_per_min > 0:
            return min(self.config.poll_interval_s, 60.0 / channel.rate_per_min)
        return self.config.poll_interval_s

    async def _sleep(self, wakeup: Wakeup) -> Hint:
        """Wait for new work, a job to end, the next due time or the poll interval; answer the
        channels a wake-up named (None: look at every channel)."""
        timeout = self.config.poll_interval_s
        # While jobs run, the one ending wakes this loop, which then asks; asked now, the
        # question would compete with the jobs' claims on a fresh event's path.
        next_due = None if self._jobs else await self.store.next_due_at()
        if next_due is not None:
            until_due = (next_due - self._clock.now()).total_seconds()
            if until_due > 0:
                timeout = min(timeout, until_due)
        now = self._clock.monotonic()
        self._resting = {i: t for i, t in self._resting.items() if t > now}
        if self._resting:
            timeout = min(timeout, min(self._resting.values()) - now)
        if self._look_put_off:
            timeout = min(timeout, self._looked_at + LOOK_AFTER_JOB_S - now)
        if self._start_by is not None:
            timeout = min(timeout, self._start_by - now)
        self._only_ended = False
        if not self._jobs and not self._handing:
            self.idle.set()
        self._sleeping = True
        try:
            # Answers at once if a job ended, or a stop came, since the last sleep (rung).
            woken = self._stopping.is_set() or await wakeup.wait(timeout)
        finally:
            self._sleeping = False
            self.idle.clear()
        if not woken:
            if self._job_ended:
                # Jobs that end together are looked at together: let the others finish.
                await asyncio.sleep(0)
                self._job_ended = False
                self._only_ended = True  # no news: a look may wait a little
            elif self._look is not None and self._look.done():
                self._only_ended = True  # a look answered: take it, not ask again at once
            return None
        self._job_ended = False
        if self._stopping.is_set():
            return None
        hint = wakeup.take_hint()
        # New work announced: the channels it names (or all) may look again at once.
        if hint is None:
            self._resting.clear()
        for channel_id in hint or ():
            self._resting.pop(channel_id, None)
        return hint

    async def _shutdown(self) -> None:
        """W3: let in-flight sends finish within the grace period, then cancel and give back."""
        self._stopping.set()
        if self._wakeup is not None:
            await self._wakeup.leave_seat()  # handed nothing more; what comes, given back
        if self._look is not None:
            self._look.cancel()
            await asyncio.gather(self._look, return_exceptions=True)
            self._look = None
        jobs = [*self._jobs.values(), *self._handing]
        if not jobs:
            return
        _, pending = await asyncio.wait(jobs, timeout=self.config.grace_s)
        for task in pending:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*pending, return_exceptions=True)
