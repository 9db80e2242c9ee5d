"""Inbox messages: what `inbox` channels received.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSONDoc = sa.JSON().with_variant(JSONB(), "postgresql")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "inbox_messages",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("channel_id", Id, nullable=False),
        sa.Column("message_id", sa.String(100), nullable=False),
        sa.Column("batch_id", Id),
        sa.Column("delivery_ids", JSONDoc, nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_inbox_messages"),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["channels.id"],
            name="fk_inbox_messages_channel_id_channels",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_inbox_messages_channel_id_id", "inbox_messages", ["channel_id", "id"])


def downgrade() -> None:
    op.drop_table("inbox_messages")
