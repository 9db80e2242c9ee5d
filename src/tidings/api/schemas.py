"""Request and response models: they validate input shapes and document the OpenAPI schema.

Field rules beyond types (lengths, NUL bytes, globs) are the core's, so the library, the CLI
and the API refuse the same input with the same messages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from tidings.core.kinds import FieldType, SizeUnit
from tidings.core.validate import CHANNEL_BOUNDS, EVENT_BOUNDS

Severity = Literal["info", "low", "medium", "high", "critical"]
State = Literal["pending", "sending", "sent", "failed", "skipped"]
MAX_ID = 2**62
CONFIG_DOC = (
    "The kind's settings, checked against its declaration: `GET /v1/channel-kinds` lists "
    "each kind's fields (name, type, required, secret). Unknown keys are refused."
)
TIMEOUT_DOC = "Seconds a send may take; the running lease must be at least 4 times it"
CONFIG_OUT_DOC = CONFIG_DOC + " Secret fields read back masked: `••••` + the last 4."


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _event(field: str) -> JsonDict:
    """The field's bounds, documented: the core checks them, with its own messages."""
    bounds: JsonDict = {}
    bounds.update(EVENT_BOUNDS[field])  # a copy: pydantic may add to it
    return bounds


def _channel(field: str) -> JsonDict:
    bounds: JsonDict = {}
    bounds.update(CHANNEL_BOUNDS[field])
    return bounds


class EventIn(Strict):
    kind: str = Field(examples=["finding.created"], json_schema_extra=_event("kind"))
    subject: str = Field(examples=["finding:8812"], json_schema_extra=_event("subject"))
    severity: Severity = "info"
    title: str = Field(default="", json_schema_extra=_event("title"))
    body: str = Field(default="", json_schema_extra=_event("body"))
    url: str | None = Field(default=None, json_schema_extra=_event("url"))
    labels: dict[str, str] = Field(default_factory=dict, json_schema_extra=_event("labels"))
    data: dict[str, Any] = Field(default_factory=dict)
    tenant: str | None = Field(default=None, json_schema_extra=_event("tenant"))
    idempotency_key: str | None = Field(default=None, json_schema_extra=_event("idempotency_key"))


class BatchIn(Strict):
    events: list[EventIn] = Field(min_length=1, max_length=1000)


class ChannelIn(Strict):
    name: str = Field(json_schema_extra=_channel("name"))
    kind: str = Field(
        description="One of the kinds `GET /v1/channel-kinds` lists",
    )
    config: dict[str, Any] = Field(default_factory=dict, description=CONFIG_DOC)
    enabled: bool = True
    mode: Literal["realtime", "digest"] = "realtime"
    digest_period_s: float = Field(default=3600.0, json_schema_extra=_channel("digest_period_s"))
    filter: dict[str, Any] = Field(default_factory=dict)
    rate_per_min: float | None = Field(
        default=None,
        description="Sends per minute (0: unlimited); the kind's default if absent",
        json_schema_extra=_channel("rate_per_min"),
    )
    rate_burst: int = Field(default=1, json_schema_extra=_channel("rate_burst"))
    max_attempts: int = Field(default=3, json_schema_extra=_channel("max_attempts"))
    retry_backoff_s: float = Field(default=30.0, json_schema_extra=_channel("retry_backoff_s"))
    timeout_s: float = Field(
        default=15.0, description=TIMEOUT_DOC, json_schema_extra=_channel("timeout_s")
    )
    max_age_s: float | None = Field(default=None, json_schema_extra=_channel("max_age_s"))
    tenant: str | None = Field(default=None, json_schema_extra=_channel("tenant"))
    templates: dict[str, str] = Field(default_factory=dict)
    fallback_channel_id: int | None = Field(
        default=None,
        description="F1: the channel a failed delivery escalates to",
        json_schema_extra=_channel("fallback_channel_id"),
    )
    retention_days: float | None = Field(
        default=None,
        description="R1: days its ended deliveries are kept (default: global)",
        json_schema_extra=_channel("retention_days"),
    )


class ChannelPatch(Strict):
    name: str | None = Field(default=None, json_schema_extra=_channel("name"))
    config: dict[str, Any] | None = Field(
        default=None,
        description=CONFIG_DOC + " A secret sent back as read (masked) keeps the stored value.",
    )
    enabled: bool | None = None
    mode: Literal["realtime", "digest"] | None = None
    digest_period_s: float | None = Field(
        default=None, json_schema_extra=_channel("digest_period_s")
    )
    filter: dict[str, Any] | None = None
    rate_per_min: float | None = Field(default=None, json_schema_extra=_channel("rate_per_min"))
    rate_burst: int | None = Field(default=None, json_schema_extra=_channel("rate_burst"))
    max_attempts: int | None = Field(default=None, json_schema_extra=_channel("max_attempts"))
    retry_backoff_s: float | None = Field(
        default=None, json_schema_extra=_channel("retry_backoff_s")
    )
    timeout_s: float | None = Field(default=None, json_schema_extra=_channel("timeout_s"))
    max_age_s: float | None = Field(default=None, json_schema_extra=_channel("max_age_s"))
    tenant: str | None = Field(default=None, json_schema_extra=_channel("tenant"))
    templates: dict[str, str] | None = None
    fallback_channel_id: int | None = Field(
        default=None, json_schema_extra=_channel("fallback_channel_id")
    )
    retention_days: float | None = Field(default=None, json_schema_extra=_channel("retention_days"))


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


class EventOut(BaseModel):
    id: int
    kind: str
    subject: str
    severity: str
    title: str
    body: str
    url: str | None
    labels: dict[str, str]
    data: dict[str, Any]
    tenant: str | None
    idempotency_key: str | None
    created_at: str


class DeliveryOut(BaseModel):
    id: int
    event_id: int
    channel_id: int
    state: str
    attempts: int
    next_attempt_at: str
    last_error: str | None
    failure: str | None
    skip_reason: str | None
    batch_id: int | None
    #: The id receivers see for its message (`webhook-id`, Message-ID), the same on retries.
    message_id: str
    created_at: str
    sent_at: str | None
    lost_leases: int = Field(description="Leases that ended without an outcome (not attempts)")
    fallback_of: int | None = Field(description="F1: the failed delivery this one escalates")


class PublishOut(BaseModel):
    event: EventOut
    deliveries: list[DeliveryOut]
    duplicate: bool


class BatchOut(BaseModel):
    results: list[PublishOut]


class DeliveryViewOut(DeliveryOut):
    channel_name: str
    channel_kind: str
    event_kind: str
    subject: str
    title: str


class AttemptOut(BaseModel):
    id: int
    delivery_id: int
    batch_id: int | None
    worker_id: str
    status: str
    error: str | None
    duration_ms: int
    provider_response: str | None
    started_at: str
    finished_at: str


class DeliveryDetailOut(DeliveryViewOut):
    attempts_log: list[AttemptOut]
    escalated_to: list[int] = Field(description="F1: deliveries this one's failure created")


class DeliveryPage(BaseModel):
    items: list[DeliveryViewOut]
    #: Exact up to 10,000 matching rows; beyond, an estimate (`total_is_estimate`).
    total: int
    page: int
    page_size: int
    total_is_estimate: bool
    #: Opaque: pass as `cursor` for the next (older) or previous (newer) page; null at an end.
    next_cursor: str | None
    prev_cursor: str | None


class ReplayIn(Strict):
    """M3: which ended deliveries to requeue; all given filters must match."""

    states: list[Literal["failed", "skipped"]] = Field(default=["failed"], min_length=1)
    channel_id: int | None = Field(default=None, ge=1, le=MAX_ID)
    failure: Literal["permanent", "exhausted", "expired"] | None = None
    event_kind: str | None = Field(default=None, max_length=200)
    tenant: str | None = Field(default=None, max_length=200)
    since: datetime | None = None
    until: datetime | None = None
    after_id: int = Field(default=0, ge=0, le=MAX_ID, description="Rows after this id (paging)")
    dry_run: bool = Field(default=False, description="Only count what would be requeued")


class ReplayOut(BaseModel):
    matched: int = Field(description="Rows the filter matches from after_id on")
    requeued: int
    dry_run: bool
    next_after_id: int | None = Field(description="More match: send again with this after_id")
    replayed: bool = Field(description="The Idempotency-Key was used before: nothing done again")


class ResendOut(BaseModel):
    delivery: DeliveryOut
    requeued: bool


class ChannelOut(BaseModel):
    id: int
    name: str
    kind: str
    config: dict[str, Any] = Field(description=CONFIG_OUT_DOC)
    enabled: bool
    disabled_reason: str | None
    mode: str
    digest_period_s: float
    filter: dict[str, Any]
    rate_per_min: float
    rate_burst: int
    max_attempts: int
    retry_backoff_s: float
    timeout_s: float
    max_age_s: float | None
    tenant: str | None
    templates: dict[str, Any]
    fallback_channel_id: int | None
    retention_days: float | None
    created_at: str
    updated_at: str


class BreakerOut(BaseModel):
    """A channel's circuit breaker (H1)."""

    channel_id: int
    channel_name: str
    breaker: Literal["closed", "open", "half_open"]
    consecutive_failures: int
    failing_since: str | None
    probe_at: str | None = Field(description="open: when the next probe may go")
    last_error: str | None


class BreakerList(BaseModel):
    items: list[BreakerOut]


class ChannelSaved(ChannelOut):
    """A channel as created or changed, and what would make its sends fail although it was
    saved (a destination the address guard refuses unless TIDINGS_ALLOWED_PRIVATE_NETWORKS
    allows it)."""

    warnings: list[str]


class ChannelList(BaseModel):
    items: list[ChannelOut]
    #: The next page's `after`; null when this page holds the last channel.
    next_after: int | None = None


class ConfigFieldOut(BaseModel):
    """One key of a channel's `config`, as its kind declares it."""

    name: str
    type: FieldType
    description: str
    required: bool
    secret: bool = Field(description="Write-only: read back masked, never logged")
    secret_parts: bool = Field(
        default=False,
        description="Holds secrets: a URL's userinfo and query values, a map's values, "
        "read back masked",
    )
    destination: bool = Field(
        default=False,
        description="Decides where the secrets are sent: changing it while keeping a stored "
        "secret (sending its mask back) is refused",
    )
    default: str | int | bool | None = Field(default=None, description="What an absent value means")
    choices: list[str] | None = Field(default=None, description="The values of a `choice`")
    minimum: int | None = None
    maximum: int | None = None


class SizeLimitOut(BaseModel):
    name: str = Field(description="`max_` + the unit, e.g. `max_text_bytes`")
    amount: int
    unit: SizeUnit


class KindOut(BaseModel):
    """A channel kind as its adapter declares it."""

    kind: str
    description: str
    flavour: str = Field(description="The markup it renders (`json` for the raw event)")
    default_rate_per_min: float = Field(description="`rate_per_min` of a new channel")
    limit: SizeLimitOut | None = Field(description="The most one message may measure")
    fields: list[ConfigFieldOut]
    example: dict[str, Any] = Field(
        description="A `config` that passes the kind's checks, with made-up values"
    )


class TestOut(BaseModel):
    outcome: str
    error: str | None
    provider_response: str | None


class RotateSecretIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grace_s: float = Field(
        default=86400.0,
        ge=0,
        le=30 * 86400.0,
        description="How long the old secret keeps signing beside the new one (0: not at all)",
    )


class RotateSecretOut(BaseModel):
    secret: str = Field(description="The new `whsec_` secret, shown this once")
    previous_secret_until: datetime | None = Field(
        description="When the old secret stops signing; null when there was none"
    )
    channel: ChannelOut


class Health(BaseModel):
    status: str


class LeaseIn(Strict):
    worker_id: str = Field(min_length=1, max_length=200)
    kinds: list[str] | None = Field(default=None, max_length=50)
    tenants: list[str] | None = Field(default=None, max_length=1000)
    max_messages: int = Field(default=50, ge=1, le=500)


class LeasedMessage(BaseModel):
    message_id: str
    delivery_ids: list[int]
    batch_id: int | None
    payload_b64: str
    size: int
    content_type: str
    title: str
    text: str


class LeaseBody(BaseModel):
    token: str
    channel: dict[str, Any]
    messages: list[LeasedMessage]


class LeaseOut(BaseModel):
    leases: list[LeaseBody]
    lease_s: float


class ResultIn(Strict):
    delivery_ids: list[int] = Field(min_length=1, max_length=500)
    status: Literal["delivered", "retryable", "permanent", "rate_limited", "partial"]
    error: str | None = Field(default=None, max_length=100_000)
    reason: str | None = None
    retry_after_s: float | None = Field(default=None, ge=0, le=86_400)
    provider_response: str | None = Field(default=None, max_length=100_000)
    disable_channel: bool = False
    started_at: datetime
    finished_at: datetime


class ReportIn(Strict):
    worker_id: str = Field(min_length=1, max_length=200)
    token: str = Field(min_length=1, max_length=64)
    results: list[ResultIn] = Field(max_length=500)


class ReportOut(BaseModel):
    recorded: int
    fenced: int
