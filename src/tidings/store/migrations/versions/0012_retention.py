"""Retention (R1): a channel may keep its history longer or shorter than the global
`retention_days`.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("channels") as batch:
        batch.add_column(sa.Column("retention_days", sa.Float()))


def downgrade() -> None:
    with op.batch_alter_table("channels") as batch:
        batch.drop_column("retention_days")
