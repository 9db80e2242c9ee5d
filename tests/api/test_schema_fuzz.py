"""schemathesis against the app's own OpenAPI, on a real server: no 500, error bodies conform.

Driven through hypothesis directly (schemathesis's pytest plugin predates pytest 9), with a
bounded number of examples per operation: enough to find dates out of range and NUL bytes in
filters (S6) in a couple of minutes; `TIDINGS_FUZZ_EXAMPLES=1000` digs deeper.
"""

from __future__ import annotations

import os
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.api.server import Served, serve
from tests.api.test_history_fuzz import instants

# RFC 3339 date-times over the whole range with any offset (and near-misses): the default
# strategy keeps to tame values and never reached 9999-12-31T23:59:59-23:00.
schemathesis.openapi.format("date-time", instants())

EXAMPLES_PER_OPERATION = int(os.environ.get("TIDINGS_FUZZ_EXAMPLES", "150"))
# Responses must conform; schema-valid input may still be refused by the core's rules (NUL
# bytes, globs, lengths), so "positive data acceptance" is not among the checks.
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def test_api_never_answers_500_and_errors_match_the_schema(tmp_path: Path) -> None:
    served = serve(tmp_path)
    try:
        schema = schemathesis.openapi.from_url(f"{served.base_url}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 14
        for operation in operations:
            _fuzz(operation, served)
    finally:
        assert served.stop() == 0
    assert "Traceback" not in served.output()


def _fuzz(operation: schemathesis.APIOperation, served: Served) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: schemathesis.Case) -> None:
        response = case.call(
            base_url=served.base_url, headers={"Authorization": f"Bearer {served.token}"}
        )
        where = f"{case.method} {case.formatted_path}"
        assert response.status_code < 500, (where, response.text)
        if response.status_code >= 400:
            body = response.json()
            assert set(body) == {"error"}, (where, body)
            assert set(body["error"]) == {"code", "message"}, (where, body)
        case.validate_response(response, checks=CHECKS)

    check()
