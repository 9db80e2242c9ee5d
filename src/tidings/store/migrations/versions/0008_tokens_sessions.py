"""Tokens with a lifecycle and server-side admin sessions (S5).

API tokens get `last_used_at`, an optional `expires_at` and a worker token's `ceiling` (the
kinds and tenants it may lease); `ui_sessions` holds one row per admin UI login, so logout
and revocation end a session at once.

Revision ID: 0008
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0008"
down_revision = "0013"
branch_labels = None
depends_on = None

JSONDoc = sa.JSON().with_variant(JSONB(), "postgresql")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("ceiling", JSONDoc))
    op.create_table(
        "ui_sessions",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("session_hash", sa.String(64), nullable=False),
        sa.Column("token_id", Id, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ui_sessions"),
        sa.UniqueConstraint("session_hash", name="uq_ui_sessions_session_hash"),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name="fk_ui_sessions_token_id_api_tokens",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_ui_sessions_token_id", "ui_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_table("ui_sessions")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("ceiling")
        batch.drop_column("expires_at")
        batch.drop_column("last_used_at")
