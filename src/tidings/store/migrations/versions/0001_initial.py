"""Initial schema: events, channels, deliveries, attempts, resends, rate buckets.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSONDoc = sa.JSON().with_variant(JSONB(), "postgresql")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)
LIVE = sa.text("state IN ('pending', 'sending')")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(200), nullable=False),
        sa.Column("subject", sa.String(500), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("url", sa.Text()),
        sa.Column("labels", JSONDoc, nullable=False),
        sa.Column("data", JSONDoc, nullable=False),
        sa.Column("tenant", sa.String(200)),
        sa.Column("idempotency_key", sa.String(255)),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
        sa.UniqueConstraint("idempotency_key", name="uq_events_idempotency_key"),
    )
    op.create_index("ix_events_created_at", "events", ["created_at"])

    op.create_table(
        "channels",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("config", JSONDoc, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text()),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("digest_period_s", sa.Float(), nullable=False),
        sa.Column("filter", JSONDoc, nullable=False),
        sa.Column("rate_per_min", sa.Float(), nullable=False),
        sa.Column("rate_burst", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("retry_backoff_s", sa.Float(), nullable=False),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("max_age_s", sa.Float()),
        sa.Column("tenant", sa.String(200)),
        sa.Column("templates", JSONDoc, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_channels"),
        sa.UniqueConstraint("name", name="uq_channels_name"),
    )

    op.create_table(
        "deliveries",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("event_id", Id, nullable=False),
        sa.Column("channel_id", Id, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.Column("failure", sa.String(16)),
        sa.Column("skip_reason", sa.String(32)),
        sa.Column("batch_id", Id),
        sa.Column("lease_owner", sa.String(200)),
        sa.Column("lease_token", sa.String(64)),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("sent_at", TS),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name="fk_deliveries_event_id_events", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["channels.id"],
            name="fk_deliveries_channel_id_channels",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("event_id", "channel_id", name="uq_deliveries_event_id_channel_id"),
    )
    op.create_index(
        "ix_deliveries_claimable",
        "deliveries",
        ["channel_id", "next_attempt_at"],
        postgresql_where=LIVE,
        sqlite_where=LIVE,
    )
    op.create_index("ix_deliveries_channel_id_state", "deliveries", ["channel_id", "state"])
    op.create_index("ix_deliveries_state", "deliveries", ["state"])
    op.create_index("ix_deliveries_created_at", "deliveries", ["created_at"])

    op.create_table(
        "attempts",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("delivery_id", Id, nullable=False),
        sa.Column("batch_id", Id),
        sa.Column("worker_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("provider_response", sa.Text()),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_attempts"),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["deliveries.id"],
            name="fk_attempts_delivery_id_deliveries",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_attempts_delivery_id", "attempts", ["delivery_id"])

    op.create_table(
        "resends",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("delivery_id", Id, nullable=False),
        sa.Column("operator", sa.String(200), nullable=False),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_resends"),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["deliveries.id"],
            name="fk_resends_delivery_id_deliveries",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("request_id", name="uq_resends_request_id"),
    )
    op.create_index("ix_resends_delivery_id", "resends", ["delivery_id"])

    op.create_table(
        "rate_buckets",
        sa.Column("channel_id", Id, nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("paused_until", TS),
        sa.PrimaryKeyConstraint("channel_id", name="pk_rate_buckets"),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["channels.id"],
            name="fk_rate_buckets_channel_id_channels",
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    for table in ("rate_buckets", "resends", "attempts", "deliveries", "channels", "events"):
        op.drop_table(table)
