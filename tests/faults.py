"""Database faults injected with real triggers on the events table, on either backend:
an event titled `POISON` is refused with a unique violation (a fault of that event alone);
an event titled `DIE` takes the database away from its transaction (on PostgreSQL the
session is terminated mid-statement; on SQLite every insert into events fails to prepare,
as when the file turns unusable)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy import text

import tidings

POISON = "poison"
DIE = "die"

_PG_ON = [
    f"""CREATE FUNCTION tidings_test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.title = '{POISON}' THEN
            RAISE EXCEPTION 'injected' USING ERRCODE = 'unique_violation';
        END IF;
        IF NEW.title = '{DIE}' THEN
            PERFORM pg_terminate_backend(pg_backend_pid());
            PERFORM pg_sleep(1);
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER tidings_test_fault BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION tidings_test_fault()""",
]
_PG_OFF = [
    "DROP TRIGGER IF EXISTS tidings_test_fault ON events",
    "DROP FUNCTION IF EXISTS tidings_test_fault()",
]
_SQLITE_ON = [
    f"""CREATE TRIGGER tidings_test_poison BEFORE INSERT ON events WHEN NEW.title = '{POISON}'
    BEGIN SELECT RAISE(ABORT, 'injected unique violation'); END""",
]
_SQLITE_DIE = [
    "CREATE TABLE tidings_test_gone (x INTEGER)",
    f"""CREATE TRIGGER tidings_test_die BEFORE INSERT ON events WHEN NEW.title = '{DIE}'
    BEGIN INSERT INTO tidings_test_gone VALUES (1); END""",
    "DROP TABLE tidings_test_gone",
]
_SQLITE_OFF = [
    "DROP TRIGGER IF EXISTS tidings_test_poison",
    "DROP TRIGGER IF EXISTS tidings_test_die",
]


async def _run(hub: tidings.Hub, statements: list[str]) -> None:
    async with hub.store.engine.begin() as conn:
        for statement in statements:
            await conn.execute(text(statement))


@contextlib.asynccontextmanager
async def faults(hub: tidings.Hub, *, die: bool = False) -> AsyncIterator[None]:
    """POISON events refused while inside; with `die`, DIE events take the database away."""
    postgres = hub.store.backend == "postgresql"
    on = _PG_ON if postgres else _SQLITE_ON + (_SQLITE_DIE if die else [])
    await _run(hub, on)
    try:
        yield
    finally:
        await _run(hub, _PG_OFF if postgres else _SQLITE_OFF)
