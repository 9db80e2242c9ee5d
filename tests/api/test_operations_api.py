"""H1 and F1 through the API: breakers as read, fallbacks set and checked, chains shown;
the breaker state in /metrics."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.api.conftest import Api
from tidings.core.breaker import Policy


async def _channel(api: Api, name: str, **fields: object) -> int:
    body = {"name": name, "kind": "inbox"} | fields
    answer = await api.client.post("/v1/channels", json=body, headers=api.admin)
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


async def test_h1_breakers_are_read_per_channel_and_in_metrics(api: Api) -> None:
    ok = await _channel(api, "ok")
    down = await _channel(api, "down")
    store = api.service.hub.store
    await store.record_health(down, False, 5, "HTTP 503", Policy(), now=datetime.now(UTC))
    listed = await api.client.get("/v1/channels/health", headers=api.read)
    assert listed.status_code == 200, listed.text
    states = {b["channel_name"]: b for b in listed.json()["items"]}
    assert states["ok"]["breaker"] == "closed"
    assert (states["down"]["breaker"], states["down"]["consecutive_failures"]) == ("open", 5)
    assert states["down"]["probe_at"] is not None
    one = await api.client.get(f"/v1/channels/{ok}/health", headers=api.read)
    assert one.json()["breaker"] == "closed"
    assert (await api.client.get("/v1/channels/health", headers=api.publish)).status_code == 403
    scrape = (await api.client.get("/metrics", headers=api.read)).text
    assert 'tidings_channel_breaker_open{channel="down"} 2.0' in scrape
    assert 'tidings_channel_breaker_open{channel="ok"} 0.0' in scrape


async def test_f1_a_fallback_is_set_checked_and_the_chain_shown(api: Api) -> None:
    email = await _channel(api, "email", filter={"kinds": ["none"]})
    robot = await _channel(api, "robot", fallback_channel_id=email)
    shown = (await api.client.get(f"/v1/channels/{robot}", headers=api.read)).json()
    assert shown["fallback_channel_id"] == email
    cycle = await api.client.patch(
        f"/v1/channels/{email}", json={"fallback_channel_id": robot}, headers=api.admin
    )
    assert cycle.status_code == 422
    assert cycle.json()["error"]["message"].startswith("fallback_channel_id:")
    published = await api.client.post(
        "/v1/events", json={"kind": "app.down", "subject": "web-1"}, headers=api.publish
    )
    (delivery,) = published.json()["deliveries"]
    store = api.service.hub.store
    claim = await store.claim_realtime(robot, 10, 60, "w")
    assert claim is not None
    await store.fail(claim.token, claim.ids, "HTTP 404")
    failed = (await api.client.get(f"/v1/deliveries/{delivery['id']}", headers=api.read)).json()
    (escalated_id,) = failed["escalated_to"]
    escalated = (await api.client.get(f"/v1/deliveries/{escalated_id}", headers=api.read)).json()
    assert (escalated["fallback_of"], escalated["channel_name"]) == (delivery["id"], "email")
