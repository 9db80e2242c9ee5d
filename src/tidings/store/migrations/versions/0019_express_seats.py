"""Seats of the dispatchers waiting for work, so that a publish can lease its rows to one.

An idle dispatcher on PostgreSQL holds a seat: session advisory locks on its LISTEN
connection, and this row naming it, its lease and the generation of its taking. A single
publish whose channels the express claim would serve leases its new rows to a seat whose
generation's lock is held, and puts them and their event in its notification: the
dispatcher sends without claiming (`tidings.store.handoff`). The lock, not the row, says
whether the seat is taken: it ends with the connection.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "express_seats",
        sa.Column("seat", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("lease_s", sa.Float, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("express_seats")
