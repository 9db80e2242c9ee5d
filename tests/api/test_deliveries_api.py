"""/v1/deliveries: history with filters and paging (M2), detail, resend (M1)."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api
from tests.web.data import fail_permanently


async def _setup(api: Api, n: int = 3) -> list[int]:
    await api.client.post("/v1/channels", json={"name": "ops", "kind": "inbox"}, headers=api.admin)
    ids = []
    for i in range(n):
        body = {
            "kind": "monitor.down" if i % 2 else "finding.created",
            "subject": f"s{i}",
            "tenant": "acme" if i == 0 else None,
        }
        response = await api.client.post("/v1/events", json=body, headers=api.publish)
        ids.append(response.json()["deliveries"][0]["id"])
    return ids


async def _fail(api: Api, delivery_id: int) -> None:
    store = api.service.hub.store
    claim = await store.claim_realtime(1, 100, 120, "w")
    assert claim is not None
    await fail_permanently(store, claim.token, [delivery_id], "HTTP 401: no")
    await store.defer(claim.token, [i for i in claim.ids if i != delivery_id])


async def test_history_newest_first_with_filters(api: Api) -> None:
    ids = await _setup(api, 4)
    page = (await api.client.get("/v1/deliveries", headers=api.read)).json()
    assert [d["id"] for d in page["items"]] == sorted(ids, reverse=True)
    assert (page["total"], page["page"], page["page_size"]) == (4, 1, 50)
    first = page["items"][-1]
    assert (
        first["channel_name"],
        first["channel_kind"],
        first["event_kind"],
        first["subject"],
    ) == ("ops", "inbox", "finding.created", "s0")
    kind = (await api.client.get("/v1/deliveries?event_kind=monitor.down", headers=api.read)).json()
    assert kind["total"] == 2
    tenant = (await api.client.get("/v1/deliveries?tenant=acme", headers=api.read)).json()
    assert [d["subject"] for d in tenant["items"]] == ["s0"]
    future = (
        await api.client.get("/v1/deliveries?since=2999-01-01T00:00:00Z", headers=api.read)
    ).json()
    assert future["total"] == 0
    past = (
        await api.client.get("/v1/deliveries?until=2000-01-01T00:00:00Z", headers=api.read)
    ).json()
    assert past["total"] == 0
    pending = (
        await api.client.get("/v1/deliveries?state=pending&channel_id=1", headers=api.read)
    ).json()
    assert pending["total"] == 4


@pytest.mark.parametrize(
    ("query", "page", "page_size"),
    [("page=0&page_size=0", 1, 50), ("page=-3&page_size=500", 1, 50), ("page=2&page_size=2", 2, 2)],
)
async def test_paging_reports_what_was_used(
    api: Api, query: str, page: int, page_size: int
) -> None:
    await _setup(api, 3)
    body = (await api.client.get(f"/v1/deliveries?{query}", headers=api.read)).json()
    assert (body["page"], body["page_size"], body["total"]) == (page, page_size, 3)


async def test_bad_filters_are_422(api: Api) -> None:
    for query in ("state=lost", "since=yesterday", "channel_id=abc"):
        response = await api.client.get(f"/v1/deliveries?{query}", headers=api.read)
        assert response.status_code == 422, query
        assert set(response.json()) == {"error"}


async def test_detail_and_resend_once_per_idempotency_key(api: Api) -> None:
    ids = await _setup(api, 1)
    await _fail(api, ids[0])
    detail = (await api.client.get(f"/v1/deliveries/{ids[0]}", headers=api.read)).json()
    assert detail["state"] == "failed"
    assert detail["attempts_log"] == []
    first = await api.client.post(
        f"/v1/deliveries/{ids[0]}/resend", headers=api.admin | {"Idempotency-Key": "r-1"}
    )
    assert first.status_code == 200
    assert first.json()["requeued"] is True
    assert first.json()["delivery"]["state"] == "pending"
    again = await api.client.post(
        f"/v1/deliveries/{ids[0]}/resend", headers=api.admin | {"Idempotency-Key": "r-1"}
    )
    assert again.json()["requeued"] is False
    conflict = await api.client.post(f"/v1/deliveries/{ids[0]}/resend", headers=api.admin)
    assert conflict.status_code == 409
    missing = await api.client.post("/v1/deliveries/4242/resend", headers=api.admin)
    assert missing.status_code == 404


async def test_m2_history_pages_by_cursor_and_refuses_a_bad_one(api: Api) -> None:
    ids = await _setup(api, 5)
    url = "/v1/deliveries"
    first = (await api.client.get(url, params={"page_size": 2}, headers=api.read)).json()
    assert (first["total"], first["total_is_estimate"], first["prev_cursor"]) == (5, False, None)
    seen = [d["id"] for d in first["items"]]
    page = first
    while page["next_cursor"]:
        answer = await api.client.get(
            url, params={"page_size": 2, "cursor": page["next_cursor"]}, headers=api.read
        )
        page = answer.json()
        seen.extend(d["id"] for d in page["items"])
    assert seen == sorted(ids, reverse=True)
    assert page["page"] == 3
    back = await api.client.get(url, params={"cursor": page["prev_cursor"]}, headers=api.read)
    assert back.json()["items"][-1]["id"] == seen[3]
    for bad in ("bogus", "e30", "x" * 5000):
        refused = await api.client.get(url, params={"cursor": bad}, headers=api.read)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "bad_cursor"
        assert "Traceback" not in refused.text
    unauthorised = await api.client.get(url, params={"cursor": first["next_cursor"]})
    assert unauthorised.status_code == 401
