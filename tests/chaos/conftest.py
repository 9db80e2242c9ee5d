"""The chaos subset starts its own PostgreSQL cluster: without initdb / pg_ctl its
PostgreSQL tests skip with a loud reason, and fail under CI=true."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.cluster import Cluster, binaries
from tests.conftest import IN_CI


@pytest.fixture(scope="session")
def chaos_cluster() -> Iterator[Cluster]:
    """One throwaway cluster for the subset's PostgreSQL runs (each makes its own database);
    the faults restart and starve it, never the machine's server."""
    bindir = binaries()
    if bindir is None:
        reason = "initdb / pg_ctl not found: the chaos suite's own PostgreSQL cluster cannot start"
        if IN_CI:
            pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
        pytest.skip(f"PostgreSQL chaos tests SKIPPED: {reason}")
    cluster = Cluster(bindir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def chaos_db(backend: str, request: pytest.FixtureRequest) -> tuple[str, Cluster | None]:
    """The backend, and on PostgreSQL the suite's own cluster."""
    if backend == "sqlite":
        return backend, None
    return backend, request.getfixturevalue("chaos_cluster")
