"""An index for digest claims: a channel's live rows in id order (D2).

A digest claim takes the channel's due rows oldest id first. Without an index in that
order, PostgreSQL either read every due row of the channel and sorted them, or walked the
primary key past every row ever sent: both grow with the table, so a 100,000-entry backlog
drained slower with every claim. Live rows only, like the claim index, so a row that is
sent leaves it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

LIVE = sa.text("state IN ('pending', 'sending')")


def upgrade() -> None:
    op.create_index(
        "ix_deliveries_live_by_id",
        "deliveries",
        ["channel_id", "id"],
        postgresql_where=LIVE,
        sqlite_where=LIVE,
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_live_by_id", table_name="deliveries")
