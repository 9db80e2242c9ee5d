"""One attempt row per attempt, enforced by a unique index.

An outcome whose answer was lost with its connection is written again, and the second write
can run while the first is still committing. A check of the rows already stored reads the
statement's snapshot, from before the first committed, so both wrote the attempt row; a
unique index sees the other write and waits for it. Rows already stored twice are removed
(the older one stays). The index leads with `delivery_id`, so it replaces the plain one.

Revision ID: 0017
Revises: 0014_history_scale
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0014_history_scale"
branch_labels = None
depends_on = None

COLUMNS = ["delivery_id", "started_at", "worker_id"]
SAME = " AND ".join(f"older.{c} = attempts.{c}" for c in COLUMNS)


def upgrade() -> None:
    op.execute(
        sa.text(
            "DELETE FROM attempts WHERE EXISTS (SELECT 1 FROM attempts AS older"
            f" WHERE {SAME} AND older.id < attempts.id)"
        )
    )
    op.create_index("ix_attempts_once", "attempts", COLUMNS, unique=True)
    op.drop_index("ix_attempts_delivery_id", table_name="attempts")


def downgrade() -> None:
    op.create_index("ix_attempts_delivery_id", "attempts", ["delivery_id"])
    op.drop_index("ix_attempts_once", table_name="attempts")
