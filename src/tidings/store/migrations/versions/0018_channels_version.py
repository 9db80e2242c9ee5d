"""A count of the changes to what a publish fans out by, bumped by a trigger on `channels`.

A publish read every channel before writing: a round trip per publish, and ten thousand rows
in a deployment with ten thousand channels. A process now keeps the channels it read with
this count, and its publish statement stores nothing when the count has moved since (the
process then reads the channels again). The trigger sees every change however it is made:
through tidings, a restore or an operator's own SQL.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: The columns a publish's fan-out reads (`tidings.store.publishing`).
FAN_OUT_COLUMNS = "filter, tenant, enabled"
BUMP = "UPDATE channels_version SET version = version + 1 WHERE id = 1"

POSTGRES = [
    f"""CREATE FUNCTION tidings_channels_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {BUMP};
    RETURN NULL;
END $$""",
    f"""CREATE TRIGGER channels_changed
AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF {FAN_OUT_COLUMNS} ON channels
FOR EACH STATEMENT EXECUTE FUNCTION tidings_channels_changed()""",
]
SQLITE = [
    f"CREATE TRIGGER channels_added AFTER INSERT ON channels BEGIN {BUMP}; END",
    f"CREATE TRIGGER channels_removed AFTER DELETE ON channels BEGIN {BUMP}; END",
    f"CREATE TRIGGER channels_changed AFTER UPDATE OF {FAN_OUT_COLUMNS} ON channels"
    f" BEGIN {BUMP}; END",
]


def upgrade() -> None:
    op.create_table(
        "channels_version",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, nullable=False),
    )
    op.execute(sa.text("INSERT INTO channels_version (id, version) VALUES (1, 0)"))
    for statement in POSTGRES if op.get_bind().dialect.name == "postgresql" else SQLITE:
        op.execute(sa.text(statement))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.text("DROP TRIGGER channels_changed ON channels"))
        op.execute(sa.text("DROP FUNCTION tidings_channels_changed()"))
    else:
        for name in ("channels_added", "channels_removed", "channels_changed"):
            op.execute(sa.text(f"DROP TRIGGER {name}"))
    op.drop_table("channels_version")
