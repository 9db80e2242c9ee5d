"""Tracing: each event keeps the W3C traceparent of the span that published it, so its
sends join the producer's trace.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("traceparent", sa.String(55)))


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_column("traceparent")
