"""Channel secrets are stored encrypted, apart from the rest of the config (S4).

`channels.secrets` holds the secret config values, AES-GCM encrypted under a key kept outside
the database; `secret_keys` the ids of the keys a deployment uses. The migration needs no
key: rows stored before it are encrypted on the first start after it (`Store.migrate`).

Revision ID: 0007
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("channels") as batch:
        batch.add_column(sa.Column("secrets", sa.Text(), nullable=True))
    op.create_table(
        "secret_keys",
        sa.Column("kid", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kid", name="pk_secret_keys"),
    )


def downgrade() -> None:
    op.drop_table("secret_keys")
    with op.batch_alter_table("channels") as batch:
        batch.drop_column("secrets")
