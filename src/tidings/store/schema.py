"""SQLAlchemy Core tables: the one declaration of the schema, which migrations must equal.

Only the store imports SQLAlchemy; rows leave it as `tidings.core.model` dataclasses.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from tidings.core.message_id import MAX_CHARS as MAX_MESSAGE_ID_CHARS
from tidings.core.states import CLAIMABLE, FINAL, State

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in, timezone-aware UTC out, on both backends.

    SQLite has no timestamp type: values are stored as naive UTC text in one fixed format, so
    comparing them as strings orders them correctly.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
        if value.tzinfo is not UTC:
            value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # a raw SQLite value, e.g. from min() over the column
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        if value.tzinfo is UTC:  # asyncpg's answer already: skip the conversion
            return value
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sqlite_text(value: datetime) -> str:
    """An aware datetime as UTCDateTime stores it on SQLite (SQLAlchemy's DATETIME format),
    for statements that bind values without SQLAlchemy's processing."""
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}"


JSONDoc = JSON().with_variant(JSONB(), "postgresql")
# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets a bigint identity.
Id = BigInteger().with_variant(Integer(), "sqlite")

events = Table(
    "events",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("kind", String(200), nullable=False),
    Column("subject", String(500), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("url", Text),
    Column("labels", JSONDoc, nullable=False),
    Column("data", JSONDoc, nullable=False),
    Column("tenant", String(200)),
    Column("idempotency_key", String(255)),
    Column("created_at", UTCDateTime, nullable=False),
    # The W3C traceparent of the span that published it (tracing; None without).
    Column("traceparent", String(55)),
    UniqueConstraint("idempotency_key"),
    Index(None, "created_at"),
    # History filters by kind and by tenant (M2, migration 0014).
    Index(None, "kind"),
    Index(
        None,
        "tenant",
        postgresql_where=text("tenant IS NOT NULL"),
        sqlite_where=text("tenant IS NOT NULL"),
    ),
)

channels = Table(
    "channels",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False),
    Column("kind", String(50), nullable=False),
    #: The config values that are not secret; the secret ones are in `secrets` (S4).
    Column("config", JSONDoc, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", Text),
    Column("mode", String(16), nullable=False),
    Column("digest_period_s", Float, nullable=False),
    Column("filter", JSONDoc, nullable=False),
    Column("rate_per_min", Float, nullable=False),
    Column("rate_burst", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("retry_backoff_s", Float, nullable=False),
    Column("timeout_s", Float, nullable=False),
    Column("max_age_s", Float),
    Column("tenant", String(200)),
    Column("templates", JSONDoc, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # F1: where a failed delivery of this channel escalates (chains of at most 3, no cycle).
    Column("fallback_channel_id", Id, ForeignKey("channels.id", ondelete="SET NULL")),
    # R1: days this channel's ended deliveries are kept (None: the global retention_days).
    Column("retention_days", Float),
    #: The secret config values, AES-GCM encrypted (`tidings.store.secretbox`); null when none.
    Column("secrets", Text),
    UniqueConstraint("name"),
    # Deleting a channel nulls the fallbacks that name it: an index, not a scan per row.
    Index(
        "ix_channels_fallback_channel_id",
        "fallback_channel_id",
        postgresql_where=text("fallback_channel_id IS NOT NULL"),
        sqlite_where=text("fallback_channel_id IS NOT NULL"),
    ),
)

#: The live (claimable) states, in a fixed order, as the claim index's predicate names them.
LIVE_STATES = tuple(sorted(s.value for s in CLAIMABLE))
_LIVE_PREDICATE = "state IN (" + ", ".join(f"'{s}'" for s in LIVE_STATES) + ")"
#: The final states, and those of them but sent: few rows, and what an operator looks for.
ENDED_STATES = tuple(sorted(s.value for s in FINAL))
ENDED_NOT_SENT = tuple(s for s in ENDED_STATES if s != State.SENT.value)
_ENDED_PREDICATE = "state IN (" + ", ".join(f"'{s}'" for s in ENDED_STATES) + ")"
_ENDED_NOT_SENT = "state IN (" + ", ".join(f"'{s}'" for s in ENDED_NOT_SENT) + ")"

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("event_id", Id, ForeignKey("events.id", ondelete="CASCADE"), nullable=False),
    Column("channel_id", Id, ForeignKey("channels.id", ondelete="CASCADE"), nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("last_error", Text),
    Column("failure", String(16)),
    Column("skip_reason", String(32)),
    Column("batch_id", Id),
    Column("lease_owner", String(200)),
    Column("lease_token", String(64)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
    # Leases that ended without an outcome; not attempts (see migration 0006).
    Column("lost_leases", Integer, nullable=False, server_default=text("0")),
    # F1: the failed delivery this one escalates (None: published, or resent).
    Column("fallback_of", Id, ForeignKey("deliveries.id", ondelete="SET NULL")),
    # The id receivers see (N1, migration 0009): random per delivery, so two databases (or
    # one restored from a backup) never send the same id; kept across retries. Last column,
    # where the migration added it: the columns here are in the database's order.
    Column("message_id", String(MAX_MESSAGE_ID_CHARS), nullable=False),
    UniqueConstraint("event_id", "channel_id"),
    # The claim's access path: due rows of one channel, only among the live ones, in the
    # claim's order (next_attempt_at, id), so a claim stops after the rows it takes.
    Index(
        "ix_deliveries_claimable",
        "channel_id",
        "next_attempt_at",
        "id",
        postgresql_where=text(_LIVE_PREDICATE),
        sqlite_where=text(_LIVE_PREDICATE),
    ),
    # A digest's access path (D2, oldest id first): the channel's live rows in id order, so a
    # claim reads the rows it takes instead of every due row, or every row ever sent.
    Index(
        "ix_deliveries_live_by_id",
        "channel_id",
        "id",
        postgresql_where=text(_LIVE_PREDICATE),
        sqlite_where=text(_LIVE_PREDICATE),
    ),
    # History's access paths (M2, migration 0014), each in id order for keyset pages: a
    # channel's ended rows (its live ones are in ix_deliveries_live_by_id); failed and skipped
    # rows by state (sent ones, nearly all rows, are read along the primary key). Every index
    # gains an entry at each state change of a row its predicate admits: ended rows only, so
    # the send path writes here once per message, and a digest claim cannot take this one
    # for the index of live rows.
    Index(
        "ix_deliveries_ended_by_channel",
        "channel_id",
        "id",
        postgresql_where=text(_ENDED_PREDICATE),
        sqlite_where=text(_ENDED_PREDICATE),
    ),
    Index(
        "ix_deliveries_ended_by_state",
        "state",
        "id",
        postgresql_where=text(_ENDED_NOT_SENT),
        sqlite_where=text(_ENDED_NOT_SENT),
    ),
    # Time ranges and retention. BRIN on PostgreSQL: rows arrive in time order, and an update
    # rarely changes a block range's summary, so it writes nothing here.
    Index(None, "created_at", postgresql_using="brin"),
    # Deleting a delivery (retention) nulls `fallback_of` on the rows that escalated it, and a
    # delivery's detail names them: an index, or each scans the table (migration 0016).
    Index(
        "ix_deliveries_fallback_of",
        "fallback_of",
        postgresql_where=text("fallback_of IS NOT NULL"),
        sqlite_where=text("fallback_of IS NOT NULL"),
    ),
)


def is_ended() -> ColumnElement[bool]:
    """`deliveries.state IN ('failed', 'sent', 'skipped')` with literals, like `is_live`."""
    return deliveries.c.state.in_([literal_column(f"'{s}'") for s in ENDED_STATES])


def is_ended_not_sent() -> ColumnElement[bool]:
    """`deliveries.state IN ('failed', 'skipped')`, the predicate of the index by state: SQLite
    reads a partial index only for a query that repeats its predicate term for term."""
    return deliveries.c.state.in_([literal_column(f"'{s}'") for s in ENDED_NOT_SENT])


def is_live() -> ColumnElement[bool]:
    """`deliveries.state IN ('pending', 'sending')`, with the states as literals.

    Only then can the planner use the claim index: the query must imply the index predicate,
    and a bound parameter could hold any state (SQLite then scans the channel's rows and
    sorts them; a generic PostgreSQL plan scans the table).
    """
    return deliveries.c.state.in_([literal_column(f"'{s}'") for s in LIVE_STATES])


#: The columns that tell one attempt from another (one worker starts one send of a
#: delivery at a time), and their unique index.
ATTEMPT_ONCE = ("delivery_id", "started_at", "worker_id")
ATTEMPT_ONCE_NAME = "ix_attempts_once"

attempts = Table(
    "attempts",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("delivery_id", Id, ForeignKey("deliveries.id", ondelete="CASCADE"), nullable=False),
    Column("batch_id", Id),
    Column("worker_id", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("duration_ms", Integer, nullable=False),
    Column("provider_response", Text),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=False),
    # One row per attempt, even when its outcome is written twice: a write whose answer was
    # lost with its connection is sent again, and may run while the first still commits.
    Index(ATTEMPT_ONCE_NAME, *ATTEMPT_ONCE, unique=True),
    # The dashboard's hourly chart (BRIN on PostgreSQL: attempts are written in time order).
    Index(None, "finished_at", postgresql_using="brin"),
)

resends = Table(
    "resends",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("delivery_id", Id, ForeignKey("deliveries.id", ondelete="CASCADE"), nullable=False),
    Column("operator", String(200), nullable=False),
    Column("request_id", String(255), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    UniqueConstraint("request_id"),
    Index(None, "delivery_id"),
)

rate_buckets = Table(
    "rate_buckets",
    metadata,
    Column(
        "channel_id",
        Id,
        ForeignKey("channels.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("tokens", Float, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("paused_until", UTCDateTime),
)

# M3: one row per bulk resend request, so its request id requeues once.
bulk_resends = Table(
    "bulk_resends",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("request_id", String(255), nullable=False),
    Column("operator", String(200), nullable=False),
    Column("query", Text, nullable=False),
    Column("matched", Integer, nullable=False),
    Column("requeued", Integer, nullable=False),
    Column("next_after_id", Id),
    Column("at", UTCDateTime, nullable=False),
    UniqueConstraint("request_id"),
)

# H1: each channel's health and circuit breaker, cluster-wide; a row appears with the first
# failure (no row: healthy).
channel_health = Table(
    "channel_health",
    metadata,
    Column("channel_id", Id, ForeignKey("channels.id", ondelete="CASCADE"), primary_key=True),
    Column("state", String(16), nullable=False),
    Column("consecutive_failures", Integer, nullable=False),
    Column("failing_since", UTCDateTime),
    Column("until", UTCDateTime),
    Column("backoff_s", Float, nullable=False),
    Column("last_error", Text),
)

# Messages delivered to `inbox` channels: the zero-setup demo target and a template preview.
inbox_messages = Table(
    "inbox_messages",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("channel_id", Id, ForeignKey("channels.id", ondelete="CASCADE"), nullable=False),
    Column("message_id", String(100), nullable=False),
    Column("batch_id", Id),
    Column("delivery_ids", JSONDoc, nullable=False),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Index(None, "channel_id", "id"),
)

# API tokens: only a SHA-256 of each token is kept; the token itself is shown once.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False),
    Column("scopes", JSONDoc, nullable=False),
    Column("token_hash", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
    # S5: written at most once a minute per token, off the request's critical section.
    Column("last_used_at", UTCDateTime),
    Column("expires_at", UTCDateTime),
    # A worker token's ceiling, fixed at creation: {"kinds": [...] | null, "tenants": ...}.
    Column("ceiling", JSONDoc),
    UniqueConstraint("token_hash"),
)

# Admin UI sessions (S5): the cookie holds a random value, the row only its SHA-256. Logout
# deletes the row; revoking the token deletes its rows (and every read joins the token).
ui_sessions = Table(
    "ui_sessions",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("session_hash", String(64), nullable=False),
    Column("token_id", Id, ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    UniqueConstraint("session_hash"),
    Index(None, "token_id"),
)

# The ids (never the keys) of the secret keys a deployment uses (S4): a process is let in only
# with one of them, so a wrong key stops it at start.
secret_keys = Table(
    "secret_keys",
    metadata,
    Column("kid", String(32), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
)

# One row counting the changes to what a publish fans out by (a channel added or removed, its
# filter, tenant or enabled changed), bumped by a trigger on `channels` (migration 0018): a
# process keeps the channels it read with the count, and its publish statement checks the
# count instead of reading every channel again.
channels_version = Table(
    "channels_version",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", BigInteger, nullable=False),
)


# The seats of dispatchers waiting for work (migration 0019, `tidings.store.handoff`): whose a
# seat is, the lease it takes and the generation of its taking. Whether it is taken is its
# generation's advisory lock's to say.
express_seats = Table(
    "express_seats",
    metadata,
    Column("seat", Integer, primary_key=True, autoincrement=False),
    Column("owner", String(200), nullable=False),
    Column("lease_s", Float, nullable=False),
    Column("generation", Integer, nullable=False),
)
