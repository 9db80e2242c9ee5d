"""Storage: SQLAlchemy Core schema, Alembic migrations and the Store on SQLite or PostgreSQL.

The only package that imports SQLAlchemy. Imports `tidings.core`, never channels or dispatch.
"""

from tidings.store.claims import MAX_DIGEST_BATCH
from tidings.store.store import Store

__all__ = ["MAX_DIGEST_BATCH", "Store"]
