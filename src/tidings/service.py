"""The service facade the HTTP API, the admin UI and the CLI share, and the only thing they
call: the Hub (channels checked by its ChannelRules), tokens, operator actions, dashboard
data, health and the remote-worker protocol. Entry points stay thin and never build SQL.

Service level: imports the Hub, tidings.dispatch, the channel registry, tidings.views,
tidings.access (tokens and sessions, reached as `Service.access`), tidings.auth,
tidings.metrics and tidings.core.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tidings import channel_file, channel_plan, secret_rotation, tracing, views, worker_protocol
from tidings.access import Access, SessionPolicy, narrowed
from tidings.auth import Scope
from tidings.channel_plan import Action as Action  # `tidings apply` sees its plan through here
from tidings.channel_plan import Plan as Plan
from tidings.channel_rules import declared, secret_fields
from tidings.channel_trial import preview_text, send_test
from tidings.channels.netguard import Network, refusal
from tidings.channels.registry import Registry
from tidings.core import validate
from tidings.core.breaker import HEALTHY
from tidings.core.errors import NotFound, StoreError, ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import (
    Channel,
    ChannelRef,
    ChannelSpec,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Event,
    Page,
    PublishResult,
    ReplayQuery,
    ReplayResult,
    ResendResult,
)
from tidings.core.outcome import Outcome
from tidings.core.states import State
from tidings.core.text import ascii_digits
from tidings.dispatch.dispatcher import check_lease
from tidings.dispatch.retention import Purger
from tidings.hub import Hub
from tidings.metrics import Metrics
from tidings.secret_rotation import DEFAULT_GRACE_S as DEFAULT_GRACE_S
from tidings.secret_rotation import rotatable as rotatable
from tidings.store.dashboard import ChannelHealth, HourBucket
from tidings.store.inbox import InboxMessage
from tidings.store.replay import MAX_PAGE
from tidings.store.retention import EXPORTED
from tidings.store.rotation import Rotation as Rotation
from tidings.store.secretbox import new_key
from tidings.store.tokens import TokenInfo as TokenInfo  # entry points see tokens through here

BOOTSTRAP_CHANNEL = "inbox"
#: One bulk resend requeues at most this many rows; the rest stay for the next request.
#: M3: rows one bulk resend requeues at most (the rest by the next request).
MAX_BULK_RESEND = MAX_PAGE


def new_signing_secret() -> str:
    """A fresh `whsec_` signing secret (Standard Webhooks)."""
    return secret_rotation.new_secret()


def new_secret_key() -> str:
    """A fresh secret key (base64 of 32 random bytes) for TIDINGS_SECRET_KEY or a key file."""
    return new_key()


@dataclass(frozen=True, slots=True)
class Dashboard:
    counts: dict[str, int]
    hourly: list[HourBucket]
    #: (channel name, created_at of its oldest pending delivery), oldest first.
    oldest_pending: list[tuple[str, datetime]]
    channel_count: int


@dataclass(frozen=True, slots=True)
class BulkResend:
    requeued: int
    #: Rows that changed since they were counted, or that this batch had requeued already.
    unchanged: int
    #: Matching failed rows beyond this request's limit.
    remaining: int


class Service:
    def __init__(
        self,
        hub: Hub,
        *,
        allowed_networks: Sequence[Network] = (),
        metrics: Metrics | None = None,
        sessions: SessionPolicy | None = None,
    ) -> None:
        self.hub = hub
        self.allowed_networks = tuple(allowed_networks)
        self.metrics = metrics if metrics is not None else Metrics(hub.store)
        #: Tokens and admin UI sessions (S5).
        self.access = Access(hub.store, lambda: hub.registry.kinds(), sessions)

    @property
    def registry(self) -> Registry:
        return self.hub.registry

    @property
    def lease_s(self) -> float:
        return self.hub.lease_s

    # -- events ---------------------------------------------------------------------------

    async def publish(self, fields: Mapping[str, Any]) -> PublishResult:
        """One event, group-committed with those published at the same moment (Hub.publish)."""
        return await self.hub.publish(**fields)

    async def publish_batch(self, items: Sequence[Mapping[str, Any]]) -> list[PublishResult]:
        checked = []
        for i, item in enumerate(items):
            try:
                checked.append(validate.event_input(**item))
            except ValidationError as error:
                raise ValidationError(f"events[{i}].{error.field}", error.message) from None
            except TypeError as error:
                raise ValidationError(f"events[{i}]", str(error)) from None
        return await self.hub.publish_many(checked)

    async def event(self, event_id: int) -> PublishResult:
        return await self.hub.get_event(event_id)

    # -- channels -------------------------------------------------------------------------

    async def create_channel(self, fields: Mapping[str, Any]) -> Channel:
        return await self.hub.channels.create(**fields)

    async def update_channel(self, channel_id: int, changes: Mapping[str, Any]) -> Channel:
        return await self.hub.channels.update(channel_id, **changes)

    async def channels(self) -> list[Channel]:
        return await self.hub.channels.list()

    async def channels_page(
        self, after_id: int, limit: int, name_contains: str | None = None
    ) -> list[Channel]:
        return await self.hub.store.channels_page(after_id, limit, name_contains)

    async def channel_refs(self) -> list[ChannelRef]:
        """Every channel's id, name and kind, without its config and secrets: for pages and
        lists that only name channels (ten thousand channels read whole took ~130 ms)."""
        return await self.hub.store.channel_refs()

    async def count_channels(self) -> int:
        return await self.hub.store.count_channels()

    async def channel(self, channel_id: int) -> Channel:
        return await self.hub.channels.get(channel_id)

    async def channel_by_ref(self, ref: str) -> Channel:
        """A channel by its id (all digits) or its name."""
        if ascii_digits(ref):
            return await self.hub.channels.get(int(ref))
        return await self.hub.channels.get_by_name(ref)

    async def enable_channel(self, channel_id: int) -> Channel:
        return await self.hub.channels.enable(channel_id)

    async def disable_channel(self, channel_id: int, reason: str) -> int:
        """Disable; returns how many pending deliveries became skipped (C7)."""
        return await self.hub.channels.disable(channel_id, reason)

    async def delete_channel(self, channel_id: int) -> None:
        await self.hub.channels.delete(channel_id)

    async def plan_channels(
        self, text: str, path: str, environ: Mapping[str, str], *, prune: bool
    ) -> channel_plan.Plan:
        """What applying the channels file `text` (read from `path`) would do; FileError
        naming the line and field when a channel of it is refused. Changes nothing."""
        declared = channel_file.parse(text, path, self.secret_fields, environ)
        stored = await self.channels()
        secrets = {kind: self.secret_fields(kind) for kind in self.kinds()}
        return channel_plan.plan(declared, stored, self.hub.channels.rules, secrets, prune=prune)

    async def apply_channels(self, plan: channel_plan.Plan) -> None:
        await channel_plan.apply(self.hub, plan)

    async def export_channels(self, *, with_secrets: bool) -> str:
        """The stored channels as a channels file; secrets masked unless `with_secrets`."""
        masked = (lambda _kind: ()) if with_secrets else self.secret_fields
        return channel_file.render(await self.channels(), masked)

    async def channel_health(
        self, channel_ids: Sequence[int] | None = None
    ) -> dict[int, ChannelHealth]:
        return await self.hub.store.channel_health(channel_ids)

    async def breakers(self) -> list[dict[str, Any]]:
        """Every channel's circuit breaker (H1), healthy ones included."""
        found = await self.hub.store.breakers()
        refs = await self.channel_refs()
        return [views.breaker(c.id, c.name, found.get(c.id, HEALTHY)) for c in refs]

    async def breaker(self, channel_id: int) -> dict[str, Any]:
        channel = await self.channel(channel_id)
        health = (await self.hub.store.breakers()).get(channel_id, HEALTHY)
        return views.breaker(channel.id, channel.name, health)

    async def channel_warnings(self, channel: Channel | ChannelSpec) -> list[str]:
        """What would make the channel's sends fail although it was saved: a destination the
        address guard refuses (loopback, private, …) unless TIDINGS_ALLOWED_PRIVATE_NETWORKS
        allows it. Said when a channel is saved, not only at its first send."""
        if channel.kind not in self.registry:
            return []
        adapter = self.registry.get(channel.kind)
        warnings = []
        for name, host in adapter.destinations(channel.config):
            why = await refusal(host, self.allowed_networks)
            if why is not None:
                warnings.append(f"config.{name}: sends will be refused: {why}")
        return warnings

    def channel_json(self, channel: Channel) -> dict[str, Any]:
        """A channel as the API, the CLI and exports show it: secrets masked (S2)."""
        return views.channel(channel, self.kind_spec(channel.kind))

    def secret_fields(self, kind: str) -> tuple[str, ...]:
        return secret_fields(self.registry.get(kind)) if kind in self.registry else ()

    def kind_spec(self, kind: str) -> KindSpec | None:
        """The kind's declaration; None for an unknown kind or one that declares nothing."""
        return declared(self.registry.get(kind)) if kind in self.registry else None

    def kinds(self) -> list[str]:
        """The registered kinds, by name."""
        return self.registry.kinds()

    def kind_specs(self) -> list[KindSpec]:
        return views.kind_specs(self.registry)

    async def rotate_signing_secret(
        self, channel_id: int, grace_s: float = secret_rotation.DEFAULT_GRACE_S
    ) -> secret_rotation.NewSecret:
        """A new signing secret, returned once; the old one signs beside it for `grace_s`."""
        channel = await self.channel(channel_id)
        spec = self.kind_spec(channel.kind)
        return await secret_rotation.rotate(self.hub, channel_id, spec, grace_s)

    async def rotate_secret_key(self, *, finish: bool = False) -> Rotation:
        """S4: seal every channel under a new key (the old one readable), or forget the old."""
        return await self.hub.store.rotate_key(finish=finish)

    async def test_channel(self, channel_id: int) -> Outcome:
        """Send a test message now, through the real adapter, without storing a delivery."""
        channel = await self.hub.channels.get(channel_id)
        adapter = self.registry.get(channel.kind)
        outcome = await send_test(adapter, channel, self.hub.store, self.allowed_networks)
        return adapter.scrubbed(outcome, channel)  # whatever the adapter did (S2)

    # -- deliveries -----------------------------------------------------------------------

    async def deliveries(
        self,
        query: DeliveryQuery,
        page: int | None,
        page_size: int | None,
        cursor: str | None = None,
    ) -> Page[DeliveryView]:
        """A history page: the one `cursor` points at, else page number `page`."""
        return await self.hub.deliveries(query, page=page, page_size=page_size, cursor=cursor)

    async def delivery(self, delivery_id: int) -> DeliveryDetail:
        return await self.hub.delivery(delivery_id)

    async def resend(self, delivery_id: int, operator: str, request_id: str | None) -> ResendResult:
        return await self.hub.resend(
            delivery_id, operator=operator, request_id=request_id or uuid.uuid4().hex
        )

    async def failed_deliveries(
        self, query: DeliveryQuery, limit: int = MAX_BULK_RESEND
    ) -> tuple[list[int], int]:
        """The ids of the failed rows matching `query` (at most `limit`), and how many match."""
        return await self.hub.store.failed_ids(query, limit)

    async def replay(
        self, query: ReplayQuery, operator: str, request_id: str | None, *, dry_run: bool
    ) -> ReplayResult:
        """M3: requeue a page of the ended rows `query` matches (or only count them), each
        row audited, once per request id."""
        if not dry_run and not request_id:
            raise ValidationError("Idempotency-Key", "is required to requeue (a dry run is not)")
        return await self.hub.store.replay(query, operator, request_id or "", dry_run=dry_run)

    async def resend_failed(self, query: DeliveryQuery, operator: str, batch_id: str) -> BulkResend:
        """The failed rows a history filter matches, requeued through M3's path (the same
        batch id twice requeues once)."""
        done = await self.replay(failed_of(query), operator, batch_id, dry_run=False)
        page = min(done.matched, MAX_PAGE)
        if done.replayed:  # submitted again: nothing requeued twice
            return BulkResend(0, done.requeued, done.matched - page)
        return BulkResend(done.requeued, page - done.requeued, done.matched - page)

    # -- retention (R1) -----------------------------------------------------------------

    async def purge_due(self, retention_days: float) -> dict[str, int]:
        """What a purge would delete now (a dry run), by channel."""
        return await self.hub.store.purge_due(retention_days)

    async def purge(self, retention_days: float, archive_dir: str | None) -> int:
        """Purge everything due now, in batches (archived first into `archive_dir`)."""
        return await Purger(self.hub.store, retention_days, archive_dir).purge_all()

    async def export_rows(
        self, before: datetime
    ) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
        """Events, deliveries and attempts created before `before`, a page at a time."""
        for name in EXPORTED:
            after = 0
            while page := await self.hub.store.export_page(name, before, after):
                yield name, page
                after = int(page[-1]["id"])

    async def preview(self, view: DeliveryView, event: Event) -> str:
        """The delivery's message as its channel's adapter renders the event now."""
        try:
            channel = await self.hub.channels.get(view.delivery.channel_id)
            adapter = self.registry.get(channel.kind)
        except (NotFound, ValidationError) as error:
            return f"(this message cannot be rendered now: {error})"
        return preview_text(adapter, channel, view.delivery, event)

    async def inbox(self, channel_id: int | None, limit: int) -> list[InboxMessage]:
        return await self.hub.store.inbox_recent(channel_id, limit)

    async def dashboard(self, hours: int = 24) -> Dashboard:
        store = self.hub.store
        return Dashboard(
            counts=await store.state_counts(),
            hourly=await store.hourly_attempts(hours),
            oldest_pending=sorted(await store.oldest_pending(), key=lambda item: item[1]),
            channel_count=await store.count_channels(),
        )

    # -- tokens ---------------------------------------------------------------------------

    async def create_token(
        self, name: str, scopes: Sequence[str], **options: Any
    ) -> tuple[str, TokenInfo]:
        """A new token (shown once) and its description; options as `Access.create_token`."""
        return await self.access.create_token(name, scopes, **options)

    async def authenticate(self, token: str) -> TokenInfo | None:
        return await self.access.authenticate(token)

    async def bootstrap(self) -> str | None:
        """First start: an admin token (returned, to print once) and an inbox channel."""
        if await self.hub.store.count_tokens() > 0:
            return None
        token, _ = await self.create_token("admin (first start)", [Scope.ADMIN.value])
        if not await self.hub.channels.list():
            await self.hub.channels.create(name=BOOTSTRAP_CHANNEL, kind="inbox")
        return token

    # -- system ---------------------------------------------------------------------------

    async def ready(self) -> bool:
        return await self.hub.store.ping()

    async def metrics_text(self) -> bytes:
        return await self.metrics.render()

    async def warm(self) -> None:
        """Ready for the first request before serving: its token check (asked for a token
        that names none) and its publish (`Store.warm`) are then as fast as the next, with
        OpenTelemetry (when installed) imported beforehand too."""
        await self.hub.store.warm(publish=True)
        with contextlib.suppress(StoreError):  # left for the first request to report
            await self.access.authenticate("")
        tracing.active()

    async def check_lease(self) -> None:
        """C5 at start: refuse a lease shorter than 4 × the largest channel timeout."""
        check_lease(self.lease_s, await self.hub.store.largest_timeout())

    # -- remote workers (W4) --------------------------------------------------------------

    async def lease_work(
        self,
        worker_id: str,
        kinds: Sequence[str] | None,
        tenants: Sequence[str] | None,
        max_messages: int,
        *,
        worker: TokenInfo,
    ) -> dict[str, Any]:
        """Claim and render due messages for a worker, within its token's ceiling (S5); the
        lease protocol's JSON answer, channel secrets included."""
        return await worker_protocol.lease(
            self.hub.store,
            self.registry,
            self.lease_s,
            worker_id,
            narrowed(kinds, worker.kinds),
            narrowed(tenants, worker.tenants),
            max_messages,
        )

    async def report_work(
        self,
        token: str,
        worker_id: str,
        results: Sequence[Mapping[str, Any]],
        *,
        worker: TokenInfo,
    ) -> dict[str, int]:
        """Record what a worker's sends did, fenced by the lease token (C3) and, like its
        lease, by its token's ceiling."""
        return await worker_protocol.report(
            self.hub.store, self.registry, token, worker_id, results, worker.kinds, worker.tenants
        )


def failed_of(query: DeliveryQuery) -> ReplayQuery:
    """A history filter's failed rows, as a bulk resend takes them."""
    return ReplayQuery(
        states=frozenset({State.FAILED}),
        channel_id=query.channel_id,
        event_kind=query.event_kind,
        tenant=query.tenant,
        since=query.since,
        until=query.until,
    )
