"""S6: no history query yields a 500 — dates out of range answer 422 naming the field, and
hypothesis throws every parameter's odd values at the API and the UI filters."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import Api

OUT_OF_RANGE = ["9999-12-31T23:59:59-23:00", "0001-01-01T00:00:00+05:00"]
EDGES = ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59+05:00"]


@pytest.mark.parametrize("value", OUT_OF_RANGE)
@pytest.mark.parametrize("field", ["since", "until"])
async def test_dates_out_of_range_are_422_naming_the_field(
    api: Api, field: str, value: str
) -> None:
    response = await api.client.get("/v1/deliveries", params={field: value}, headers=api.read)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"].startswith(f"{field}: out of range")


@pytest.mark.parametrize("value", EDGES)
async def test_the_edges_of_the_range_are_fine(api: Api, value: str) -> None:
    for field in ("since", "until"):
        response = await api.client.get("/v1/deliveries", params={field: value}, headers=api.read)
        assert response.status_code == 200, (field, response.text)


async def test_a_report_with_times_out_of_range_is_422(api: Api) -> None:
    result = {
        "delivery_ids": [1],
        "status": "delivered",
        "started_at": OUT_OF_RANGE[0],
        "finished_at": OUT_OF_RANGE[1],
    }
    body = {"worker_id": "w", "token": "t", "results": [result]}
    response = await api.client.post("/v1/worker/report", json=body, headers=api.worker)
    assert response.status_code == 422, response.text
    assert "results[0].started_at" in response.json()["error"]["message"]


def instants() -> st.SearchStrategy[str]:
    """RFC 3339-ish text: any datetime, any offset within a day, and near-misses."""
    offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
    # The ends of the range, where an offset pushes the instant out of it, drawn often.
    moments = st.one_of(st.datetimes(), st.sampled_from([datetime.min, datetime.max]))
    aware = st.builds(lambda d, tz: d.replace(tzinfo=tz).isoformat(), moments, offsets)
    naive = st.datetimes().map(datetime.isoformat)
    return st.one_of(aware, naive, st.text(max_size=40), st.integers().map(str))


PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "since": instants(),
        "until": instants(),
        "channel_id": st.one_of(st.integers().map(str), st.text(max_size=10)),
        "state": st.one_of(st.sampled_from(["pending", "sent", "failed"]), st.text(max_size=10)),
        "event_kind": st.text(max_size=250),
        "tenant": st.text(max_size=250),
        "page": st.one_of(st.integers().map(str), st.text(max_size=10)),
        "page_size": st.one_of(st.integers().map(str), st.text(max_size=10)),
    },
)
FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(params=PARAMS)
async def test_history_never_answers_500(api: Api, params: dict[str, str]) -> None:
    response = await api.client.get("/v1/deliveries", params=params, headers=api.read)
    assert response.status_code in (200, 422), (params, response.text)
    if response.status_code == 422:
        assert set(response.json()["error"]) == {"code", "message"}


@pytest.mark.parametrize("field", ["event_kind", "tenant"])
async def test_nul_in_a_text_filter_is_422_not_a_database_error(api: Api, field: str) -> None:
    response = await api.client.get("/v1/deliveries", params={field: "a\x00b"}, headers=api.read)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"].startswith(field)
