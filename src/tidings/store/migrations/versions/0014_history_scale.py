"""Indexes for history and the dashboard at scale, and fewer of them on the send path.

History pages are keyset pages over the delivery id, so each filter needs an index that yields
its rows in id order: a channel's ended rows by (channel_id, id) (its live rows are in the
digest's index of live rows, and a full index there would compete with it for digest claims);
failed and skipped rows by (state, id) (sent rows, nearly all of them, are read along the
primary key); events by kind and by tenant. The dashboard's hourly chart reads attempts by
finish time. (A delivery's detail finds the rows it escalated to by migration 0016's index.)

Every state change of a delivery writes a new entry in each index whose predicate the row
meets, so the indexes on (channel_id, state), (state) and (created_at) went: a delivered
message (insert, claim, sent) wrote 19 B-tree index entries, it now writes 11. On
PostgreSQL, time columns get BRIN indexes (rows arrive in time order; a block range's
summary rarely changes, so an update writes nothing there); SQLite has only B-trees.

Revision ID: 0014_history_scale
Revises: 0016
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_history_scale"
down_revision = "0016"
branch_labels = None
depends_on = None

ENDED = sa.text("state IN ('failed', 'sent', 'skipped')")
ENDED_NOT_SENT = sa.text("state IN ('failed', 'skipped')")
HAS_TENANT = sa.text("tenant IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_deliveries_channel_id_state", table_name="deliveries")
    op.drop_index("ix_deliveries_state", table_name="deliveries")
    op.drop_index("ix_deliveries_created_at", table_name="deliveries")
    op.create_index(
        "ix_deliveries_ended_by_channel",
        "deliveries",
        ["channel_id", "id"],
        postgresql_where=ENDED,
        sqlite_where=ENDED,
    )
    op.create_index(
        "ix_deliveries_ended_by_state",
        "deliveries",
        ["state", "id"],
        postgresql_where=ENDED_NOT_SENT,
        sqlite_where=ENDED_NOT_SENT,
    )
    op.create_index(
        "ix_deliveries_created_at", "deliveries", ["created_at"], postgresql_using="brin"
    )
    op.create_index("ix_events_kind", "events", ["kind"])
    op.create_index(
        "ix_events_tenant",
        "events",
        ["tenant"],
        postgresql_where=HAS_TENANT,
        sqlite_where=HAS_TENANT,
    )
    op.create_index("ix_attempts_finished_at", "attempts", ["finished_at"], postgresql_using="brin")


def downgrade() -> None:
    op.drop_index("ix_attempts_finished_at", table_name="attempts")
    op.drop_index("ix_events_tenant", table_name="events")
    op.drop_index("ix_events_kind", table_name="events")
    op.drop_index("ix_deliveries_created_at", table_name="deliveries")
    op.drop_index("ix_deliveries_ended_by_state", table_name="deliveries")
    op.drop_index("ix_deliveries_ended_by_channel", table_name="deliveries")
    op.create_index("ix_deliveries_created_at", "deliveries", ["created_at"])
    op.create_index("ix_deliveries_state", "deliveries", ["state"])
    op.create_index("ix_deliveries_channel_id_state", "deliveries", ["channel_id", "state"])
