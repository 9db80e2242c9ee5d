"""Alembic environment: runs on the connection `tidings.store.migrate` hands it."""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from tidings.store.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_from_url(url: str) -> None:
    from tidings.store.engine import create_engine
    from tidings.store.url import parse

    async def main() -> None:
        engine = create_engine(parse(url))
        async with engine.begin() as conn:
            await conn.run_sync(_run)
        await engine.dispose()

    asyncio.run(main())


connection: Any = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    _run_from_url(context.config.get_main_option("sqlalchemy.url") or "")
