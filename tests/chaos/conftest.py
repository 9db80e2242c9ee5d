"""The chaos subset starts its own PostgreSQL cluster: without initdb / pg_ctl its
PostgreSQL tests skip with a loud reason, and fail under CI=true."""

from __future__ import annotations

import pytest

from tests.chaos.cluster import binaries
from tests.conftest import IN_CI


@pytest.fixture
def chaos_backend(backend: str) -> str:
    if backend == "postgresql" and binaries() is None:
        reason = "initdb / pg_ctl not found: the chaos suite's own PostgreSQL cluster cannot start"
        if IN_CI:
            pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
        pytest.skip(f"PostgreSQL chaos tests SKIPPED: {reason}")
    return backend
