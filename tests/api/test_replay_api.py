"""M3 over HTTP: POST /v1/deliveries/resend counts, requeues once per Idempotency-Key."""

from __future__ import annotations

from tests.api.conftest import Api


async def _failed(api: Api, n: int) -> int:
    hub = api.service.hub
    channel = await hub.channels.create(name="a", kind="inbox")
    await hub.publish_many([{"kind": "a.x", "subject": f"s{i}"} for i in range(n)])
    got = await hub.store.claim_realtime(channel.id, n, 60, "w")
    assert got is not None
    await hub.store.fail(got.token, got.ids, "HTTP 404")
    return channel.id


async def test_m3_dry_run_then_requeue_once_per_key(api: Api) -> None:
    channel_id = await _failed(api, 3)
    body = {"channel_id": channel_id, "failure": "permanent"}
    counted = await api.client.post(
        "/v1/deliveries/resend", json=body | {"dry_run": True}, headers=api.admin
    )
    assert counted.status_code == 200, counted.text
    assert counted.json() == {
        "matched": 3,
        "requeued": 0,
        "dry_run": True,
        "next_after_id": None,
        "replayed": False,
    }
    keyed = api.admin | {"Idempotency-Key": "replay-1"}
    done = await api.client.post("/v1/deliveries/resend", json=body, headers=keyed)
    assert (done.json()["requeued"], done.json()["replayed"]) == (3, False)
    again = await api.client.post("/v1/deliveries/resend", json=body, headers=keyed)
    assert (again.json()["requeued"], again.json()["replayed"]) == (3, True)
    page = await api.client.get("/v1/deliveries", params={"state": "pending"}, headers=api.read)
    assert page.json()["total"] == 3


async def test_m3_bad_requests_change_nothing(api: Api) -> None:
    await _failed(api, 1)
    url = "/v1/deliveries/resend"
    no_key = await api.client.post(url, json={}, headers=api.admin)
    assert no_key.status_code == 422
    assert "Idempotency-Key" in no_key.json()["error"]["message"]
    sent_state = await api.client.post(
        url, json={"states": ["sent"]}, headers=api.admin | {"Idempotency-Key": "k"}
    )
    assert sent_state.status_code == 422
    assert (await api.client.post(url, json={"dry_run": True}, headers=api.read)).status_code == 403
    pending = await api.client.get("/v1/deliveries", params={"state": "pending"}, headers=api.read)
    assert pending.json()["total"] == 0
