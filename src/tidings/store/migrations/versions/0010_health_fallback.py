"""Channel health and the circuit breaker (H1), fallback channels (F1).

`channel_health` holds each channel's breaker, cluster-wide: a row appears with the first
failure. `channels.fallback_channel_id` names where a failed delivery escalates;
`deliveries.fallback_of` links an escalated delivery to the one that failed.

Revision ID: 0010
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0006"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "channel_health",
        sa.Column("channel_id", Id, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("failing_since", When),
        sa.Column("until", When),
        sa.Column("backoff_s", sa.Float(), nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["channels.id"],
            name="fk_channel_health_channel_id_channels",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("channel_id", name="pk_channel_health"),
    )
    with op.batch_alter_table("channels") as batch:
        batch.add_column(sa.Column("fallback_channel_id", Id))
        batch.create_foreign_key(
            "fk_channels_fallback_channel_id_channels",
            "channels",
            ["fallback_channel_id"],
            ["id"],
            ondelete="SET NULL",
        )
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("fallback_of", Id))
        batch.create_foreign_key(
            "fk_deliveries_fallback_of_deliveries",
            "deliveries",
            ["fallback_of"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_constraint("fk_deliveries_fallback_of_deliveries", type_="foreignkey")
        batch.drop_column("fallback_of")
    with op.batch_alter_table("channels") as batch:
        batch.drop_constraint("fk_channels_fallback_channel_id_channels", type_="foreignkey")
        batch.drop_column("fallback_channel_id")
    op.drop_table("channel_health")
