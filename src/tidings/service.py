"""The service facade the HTTP API, the admin UI and the CLI share: one composition of the Hub,
the channel registry and the settings, so entry points stay thin and never build SQL."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from tidings.auth import Scope, new_token, token_hash
from tidings.channels.base import SendContext, Target
from tidings.channels.http import HttpClient
from tidings.channels.netguard import Network
from tidings.channels.registry import Registry
from tidings.core import validate
from tidings.core.errors import ValidationError
from tidings.core.model import (
    Channel,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Event,
    Page,
    PublishResult,
    ResendResult,
    Severity,
    rfc3339,
)
from tidings.core.outcome import Outcome
from tidings.core.redact import keep_unchanged_secrets, redact_config
from tidings.dispatch.dispatcher import LEASE_TIMEOUT_FACTOR
from tidings.dispatch.sending import render_single, send
from tidings.hub import Hub
from tidings.render import default_renderer
from tidings.store.tokens import TokenInfo

BOOTSTRAP_CHANNEL = "inbox"


class Service:
    def __init__(
        self,
        hub: Hub,
        registry: Registry,
        *,
        lease_s: float = 120.0,
        allowed_networks: Sequence[Network] = (),
    ) -> None:
        self.hub = hub
        self.registry = registry
        self.lease_s = lease_s
        self.allowed_networks = tuple(allowed_networks)

    # -- events ---------------------------------------------------------------------------

    async def publish(self, fields: Mapping[str, Any]) -> PublishResult:
        (result,) = await self.hub.publish_many([fields])
        return result

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

    def check_channel(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Kind known, config valid for it, rate default per kind, timeout within the lease."""
        kind = fields.get("kind")
        adapter = self.registry.get(str(kind))
        fields = dict(fields)
        config = fields.get("config") or {}
        if not isinstance(config, dict):
            raise ValidationError("config", "must be an object")
        fields["config"] = adapter.validate_config(config)
        fields.setdefault("rate_per_min", adapter.spec.default_rate_per_min)
        if "templates" in fields:
            fields["templates"] = self._templates(fields["templates"])
        timeout_s = fields.get("timeout_s", 15.0)
        if isinstance(timeout_s, int | float) and timeout_s * LEASE_TIMEOUT_FACTOR > self.lease_s:
            raise ValidationError(
                "timeout_s",
                f"{timeout_s:g} s is too long for the running lease of {self.lease_s:g} s "
                f"(the lease must be at least {LEASE_TIMEOUT_FACTOR} × timeout_s)",
            )
        return fields

    async def create_channel(self, fields: Mapping[str, Any]) -> Channel:
        return await self.hub.channels.create(**self.check_channel(dict(fields)))

    def _templates(self, templates: Any) -> dict[str, str]:
        """Overrides are compiled (and tried on a sample event) when saved, not at send time."""
        return default_renderer().validate_templates(templates or {})

    async def update_channel(self, channel_id: int, changes: Mapping[str, Any]) -> Channel:
        current = await self.hub.channels.get(channel_id)
        adapter = self.registry.get(current.kind)
        changes = dict(changes)
        if "kind" in changes and changes["kind"] != current.kind:
            raise ValidationError("kind", "cannot change a channel's kind; create a new channel")
        if "config" in changes and isinstance(changes["config"], dict):
            changes["config"] = keep_unchanged_secrets(
                changes["config"], current.config, adapter.secret_fields
            )
        merged = {**_spec_fields(current), **changes}
        checked = self.check_channel(merged)
        updates = {k: checked[k] for k in changes if k != "kind"}
        if "config" in changes:
            updates["config"] = checked["config"]
        return await self.hub.channels.update(channel_id, **updates)

    def channel_json(self, channel: Channel) -> dict[str, Any]:
        """A channel as the API shows it: secrets redacted."""
        secrets = (
            self.registry.get(channel.kind).secret_fields if channel.kind in self.registry else ()
        )
        return {
            "id": channel.id,
            "name": channel.name,
            "kind": channel.kind,
            "config": redact_config(channel.config, secrets),
            "enabled": channel.enabled,
            "disabled_reason": channel.disabled_reason,
            "mode": channel.mode.value,
            "digest_period_s": channel.digest_period_s,
            "filter": channel.filter,
            "rate_per_min": channel.rate_per_min,
            "rate_burst": channel.rate_burst,
            "max_attempts": channel.max_attempts,
            "retry_backoff_s": channel.retry_backoff_s,
            "timeout_s": channel.timeout_s,
            "max_age_s": channel.max_age_s,
            "tenant": channel.tenant,
            "templates": channel.templates,
            "created_at": rfc3339(channel.created_at),
            "updated_at": rfc3339(channel.updated_at),
        }

    async def test_channel(self, channel_id: int) -> Outcome:
        """Send a test message now, through the real adapter, without storing a delivery."""
        channel = await self.hub.channels.get(channel_id)
        adapter = self.registry.get(channel.kind)
        now = datetime.now(UTC)
        event = Event(
            id=0,
            kind="tidings.test",
            subject=f"channel:{channel.name}",
            severity=Severity.INFO,
            title=f"Test message from tidings to {channel.name}",
            body="If you can read this, the channel works.",
            url=None,
            labels={},
            data={},
            tenant=None,
            idempotency_key=None,
            created_at=now,
        )
        target = Target((0,))
        message = render_single(adapter, channel, target, event)
        async with HttpClient(allowed_networks=self.allowed_networks) as http:
            ctx = SendContext(http=http, store=self.hub.store, attempt_at=now)
            result = await send(adapter, ctx, channel, message, lambda: datetime.now(UTC))
        return result.outcome

    # -- deliveries -----------------------------------------------------------------------

    async def deliveries(
        self, query: DeliveryQuery, page: int | None, page_size: int | None
    ) -> Page[DeliveryView]:
        return await self.hub.deliveries(query, page=page, page_size=page_size)

    async def delivery(self, delivery_id: int) -> DeliveryDetail:
        return await self.hub.delivery(delivery_id)

    async def resend(self, delivery_id: int, operator: str, request_id: str | None) -> ResendResult:
        return await self.hub.resend(
            delivery_id, operator=operator, request_id=request_id or uuid.uuid4().hex
        )

    # -- tokens ---------------------------------------------------------------------------

    async def create_token(self, name: str, scopes: Sequence[str]) -> tuple[str, TokenInfo]:
        if not name or len(name) > 100:
            raise ValidationError("name", "a name of 1 to 100 characters is required")
        unknown = [s for s in scopes if s not in {scope.value for scope in Scope}]
        if unknown or not scopes:
            raise ValidationError("scope", "each scope must be one of publish, read, admin")
        token = new_token()
        info = await self.hub.store.create_token(name, sorted(set(scopes)), token_hash(token))
        return token, info

    async def authenticate(self, token: str) -> TokenInfo | None:
        return await self.hub.store.find_token(token_hash(token))

    async def bootstrap(self) -> str | None:
        """First start: an admin token (returned, to print once) and an inbox channel."""
        if await self.hub.store.count_tokens() > 0:
            return None
        token, _ = await self.create_token("admin (first start)", [Scope.ADMIN.value])
        if not await self.hub.channels.list():
            await self.hub.channels.create(name=BOOTSTRAP_CHANNEL, kind="inbox")
        return token


def _spec_fields(channel: Channel) -> dict[str, Any]:
    fields = asdict(channel.spec())
    fields["mode"] = channel.mode.value
    return fields
