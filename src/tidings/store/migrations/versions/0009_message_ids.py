"""Message ids: a random id per delivery, the id receivers see (N1).

`webhook-id` (and an email's Message-ID) used to be made from row ids, so two databases, or one
restored from a backup, sent the same ids, and receivers that drop repeated ids (as Standard
Webhooks tells them to) dropped real messages. Rows already stored get a random id here.

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None

#: 32 hex digits of randomness per row, as tidings.core.message_id draws them.
_RANDOM_HEX = {
    "sqlite": "lower(hex(randomblob(16)))",
    # md5 of two random() draws and the row id: unique per row, unguessable across databases
    # (gen_random_uuid() needs PostgreSQL 13).
    "postgresql": "md5(random()::text || random()::text || id::text)",
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("message_id", sa.String(36), nullable=True))
    op.execute(f"UPDATE deliveries SET message_id = 'msg_' || {_RANDOM_HEX[dialect]}")
    with op.batch_alter_table("deliveries") as batch:
        batch.alter_column("message_id", existing_type=sa.String(36), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("message_id")
