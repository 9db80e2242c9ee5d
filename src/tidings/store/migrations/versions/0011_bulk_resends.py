"""Bulk replay (M3): one row per bulk resend request, so a request key requeues once.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "bulk_resends",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.Column("operator", sa.String(200), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("matched", sa.Integer(), nullable=False),
        sa.Column("requeued", sa.Integer(), nullable=False),
        sa.Column("next_after_id", Id),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_bulk_resends"),
        sa.UniqueConstraint("request_id", name="uq_bulk_resends_request_id"),
    )


def downgrade() -> None:
    op.drop_table("bulk_resends")
