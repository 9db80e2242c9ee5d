"""Lost leases are counted apart from attempts.

A lease that ends without an outcome (its worker crashed or stalled) is audited as
`lease_lost` and does not count as an attempt; `lost_leases` counts them, so a row that keeps
killing workers still ends (exhausted) once it has lost more than `max_attempts` leases.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("lost_leases", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("lost_leases")
