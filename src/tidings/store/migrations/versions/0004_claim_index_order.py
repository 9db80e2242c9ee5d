"""The claim index carries the id, so a claim reads its rows in order instead of sorting.

A realtime claim takes the oldest due rows `ORDER BY next_attempt_at, id`. Without the id in
the index, PostgreSQL read every due row of the channel and sorted them on each claim (a
backlog of 20,000 rows cost ~6 ms per claim, and more the longer the backlog).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

LIVE = sa.text("state IN ('pending', 'sending')")


def _claim_index(columns: list[str]) -> None:
    op.drop_index("ix_deliveries_claimable", table_name="deliveries")
    op.create_index(
        "ix_deliveries_claimable",
        "deliveries",
        columns,
        postgresql_where=LIVE,
        sqlite_where=LIVE,
    )


def upgrade() -> None:
    _claim_index(["channel_id", "next_attempt_at", "id"])


def downgrade() -> None:
    _claim_index(["channel_id", "next_attempt_at"])
