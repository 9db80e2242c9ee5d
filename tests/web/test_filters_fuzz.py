"""S6: the UI's history filters never yield a 500: dates out of range, and whatever else
hypothesis makes of the query string, are a message on the page."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.test_history_fuzz import OUT_OF_RANGE, instants
from tests.web.conftest import Ui


@pytest.mark.parametrize("value", OUT_OF_RANGE)
@pytest.mark.parametrize("field", ["since", "until"])
async def test_dates_out_of_range_are_a_message_on_the_page(
    logged_in: Ui, field: str, value: str
) -> None:
    page = await logged_in.client.get("/ui/deliveries", params={field: value})
    assert page.status_code == 200, page.text
    assert f"{field}: out of range" in page.text
    bulk = await logged_in.client.get("/ui/deliveries/resend-failed", params={field: value})
    assert bulk.status_code == 200  # the filter is left out, as any other it cannot read


FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "since": instants(),
        "until": instants(),
        "channel": st.one_of(st.integers().map(str), st.text(max_size=10)),
        "state": st.text(max_size=10),
        "kind": st.text(max_size=250),
        "page": st.one_of(st.integers().map(str), st.text(max_size=10)),
        "page_size": st.one_of(st.integers().map(str), st.text(max_size=10)),
        "partial": st.sampled_from(["", "1"]),
    },
)


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=FILTERS)
async def test_ui_filters_never_answer_500(logged_in: Ui, params: dict[str, str]) -> None:
    for path in ("/ui/deliveries", "/ui/inbox", "/ui/deliveries/resend-failed"):
        page = await logged_in.client.get(path, params=params)
        assert page.status_code < 500, (path, params)


async def test_nul_in_the_kind_filter_is_a_message_on_the_page(logged_in: Ui) -> None:
    page = await logged_in.client.get("/ui/deliveries", params={"kind": "a\x00b"})
    assert page.status_code == 200
    assert "kind: must not contain NUL" in page.text
