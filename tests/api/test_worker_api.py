"""W4: remote workers lease rendered messages over HTTP and report back, fenced by token."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

from tests.api.conftest import Api, bearer
from tests.store.helpers import at
from tidings.core.states import State

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="


async def _webhook(api: Api, name: str = "hook", **fields: object) -> int:
    body = {
        "name": name,
        "kind": "webhook",
        "config": {"url": "https://hooks.invalid/x", "secret": SECRET},
    }
    response = await api.client.post("/v1/channels", json=body | fields, headers=api.admin)
    assert response.status_code == 201, response.text
    channel_id: int = response.json()["id"]
    return channel_id


async def _lease(api: Api, **body: object) -> dict[str, object]:
    response = await api.client.post(
        "/v1/worker/lease", json={"worker_id": "remote-1"} | body, headers=api.worker
    )
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


def _result(ids: list[int], status: str = "delivered", **extra: object) -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "delivery_ids": ids,
        "status": status,
        "started_at": now.isoformat(),
        "finished_at": (now + timedelta(milliseconds=30)).isoformat(),
    } | extra


async def test_lease_renders_at_lease_time_and_report_records(api: Api) -> None:
    await _webhook(api)
    for i in range(3):
        await api.client.post(
            "/v1/events", json={"kind": "a.b", "subject": f"s{i}"}, headers=api.publish
        )
    leased = await _lease(api)
    (lease,) = leased["leases"]  # type: ignore[misc]
    assert lease["channel"]["config"]["secret"] == SECRET  # the worker needs it to sign
    bodies = [json.loads(base64.b64decode(m["payload_b64"])) for m in lease["messages"]]
    assert [b["event"]["subject"] for b in bodies] == ["s0", "s1", "s2"]
    ids = [m["delivery_ids"][0] for m in lease["messages"]]
    report = {
        "worker_id": "remote-1",
        "token": lease["token"],
        "results": [_result(ids[:2]), _result(ids[2:], "retryable", error="HTTP 503: busy")],
    }
    answer = await api.client.post("/v1/worker/report", json=report, headers=api.worker)
    assert answer.json() == {"recorded": 3, "fenced": 0}
    rows = {
        d["id"]: d
        for d in (await api.client.get("/v1/deliveries", headers=api.read)).json()["items"]
    }
    assert [rows[i]["state"] for i in ids] == ["sent", "sent", "pending"]
    assert rows[ids[2]]["last_error"] == "HTTP 503: busy"
    detail = (await api.client.get(f"/v1/deliveries/{ids[0]}", headers=api.read)).json()
    assert detail["attempts_log"][0]["worker_id"] == "remote-1"
    assert detail["attempts_log"][0]["duration_ms"] == 30


async def test_a_worker_only_gets_the_kinds_and_tenants_it_declares(api: Api) -> None:
    await _webhook(api, "acme-hook", tenant="acme")
    await api.client.post(
        "/v1/events", json={"kind": "a.b", "subject": "s", "tenant": "acme"}, headers=api.publish
    )
    assert (await _lease(api, kinds=["slack"]))["leases"] == []
    assert (await _lease(api, tenants=["globex"]))["leases"] == []
    assert len((await _lease(api, kinds=["webhook"], tenants=["acme"]))["leases"]) == 1  # type: ignore[arg-type]


async def test_inbox_channels_are_never_leased(api: Api) -> None:
    await api.client.post(
        "/v1/channels", json={"name": "inbox", "kind": "inbox"}, headers=api.admin
    )
    await api.client.post("/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish)
    assert (await _lease(api))["leases"] == []


async def test_a_stale_report_is_fenced_and_changes_nothing(api: Api) -> None:
    channel_id = await _webhook(api)
    await api.client.post("/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish)
    (lease,) = (await _lease(api))["leases"]  # type: ignore[misc]
    ids = lease["messages"][0]["delivery_ids"]
    fresh = await api.service.hub.store.claim_realtime(channel_id, 10, 120, "local", now=at(300))
    assert fresh is not None
    detail_path = f"/v1/deliveries/{ids[0]}"
    before = (await api.client.get(detail_path, headers=api.read)).json()
    report = {"worker_id": "remote-1", "token": lease["token"], "results": [_result(ids)]}
    answer = await api.client.post("/v1/worker/report", json=report, headers=api.worker)
    assert answer.json() == {"recorded": 0, "fenced": 1}
    after = (await api.client.get(detail_path, headers=api.read)).json()
    assert after["state"] == State.SENDING.value  # still the fresh claim's
    assert after == before  # the stale report changed nothing: row and attempt rows alike


async def test_unreported_rows_are_given_back(api: Api) -> None:
    await _webhook(api)
    for i in range(2):
        await api.client.post(
            "/v1/events", json={"kind": "a.b", "subject": f"s{i}"}, headers=api.publish
        )
    (lease,) = (await _lease(api))["leases"]  # type: ignore[misc]
    first = lease["messages"][0]["delivery_ids"]
    report = {"worker_id": "remote-1", "token": lease["token"], "results": [_result(first)]}
    await api.client.post("/v1/worker/report", json=report, headers=api.worker)
    rows = (await api.client.get("/v1/deliveries", headers=api.read)).json()["items"]
    states = {d["id"]: (d["state"], d["attempts"]) for d in rows}
    assert states[first[0]] == ("sent", 1)
    other = next(i for i in states if i != first[0])
    assert states[other] == ("pending", 0)


async def test_bad_reports_are_422(api: Api) -> None:
    for body in (
        {"worker_id": "w", "token": "t", "results": [_result([1], "teleported")]},
        {"worker_id": "w", "token": "t", "results": [_result([1], "retryable", reason="gremlins")]},
        {"worker_id": "", "token": "t", "results": []},
    ):
        response = await api.client.post("/v1/worker/report", json=body, headers=api.worker)
        assert response.status_code == 422, (body, response.text)
        assert set(response.json()) == {"error"}


async def _worker_token(api: Api, **ceiling: list[str]) -> dict[str, str]:
    token, _ = await api.service.access.create_token("far-worker", ["worker"], **ceiling)
    return bearer(token)


async def test_s5_only_worker_tokens_lease_so_admin_tokens_never_get_secrets(api: Api) -> None:
    await _webhook(api)
    await api.client.post("/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish)
    for headers in (api.admin, api.read, api.publish):
        response = await api.client.post(
            "/v1/worker/lease", json={"worker_id": "w"}, headers=headers
        )
        assert response.status_code == 403, response.text
        assert SECRET not in response.text
        report = {"worker_id": "w", "token": "t", "results": []}
        answer = await api.client.post("/v1/worker/report", json=report, headers=headers)
        assert answer.status_code == 403
    # The worker token may do nothing else.
    for method, path in (("GET", "/v1/channels"), ("GET", "/v1/deliveries"), ("GET", "/metrics")):
        assert (await api.client.request(method, path, headers=api.worker)).status_code == 403
    published = await api.client.post(
        "/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.worker
    )
    assert published.status_code == 403


async def test_s5_a_worker_token_leases_only_within_its_ceiling(api: Api) -> None:
    await _webhook(api, "acme-hook", tenant="acme")
    await _webhook(api, "globex-hook", tenant="globex")
    await _webhook(api, "every-tenant-hook")
    for tenant in ("acme", "globex"):
        await api.client.post(
            "/v1/events",
            json={"kind": "a.b", "subject": "s", "tenant": tenant},
            headers=api.publish,
        )
    acme_only = await _worker_token(api, tenants=["acme"])
    slack_only = await _worker_token(api, kinds=["slack"])

    async def leased(headers: dict[str, str], **body: object) -> list[str]:
        response = await api.client.post(
            "/v1/worker/lease", json={"worker_id": "w"} | body, headers=headers
        )
        assert response.status_code == 200, response.text
        return [lease["channel"]["name"] for lease in response.json()["leases"]]

    assert await leased(slack_only, kinds=["webhook"]) == []  # declared, but over the ceiling
    assert await leased(slack_only) == []
    # Declaring more tenants than the ceiling holds still gets only the ceiling's.
    assert await leased(acme_only, tenants=["acme", "globex"]) == ["acme-hook"]
    assert await leased(acme_only) == []  # acme's rows are leased already
    everything = await leased(api.worker)
    assert sorted(everything) == ["every-tenant-hook", "globex-hook"]


async def test_s5_a_report_for_a_lease_outside_the_ceiling_is_fenced(api: Api) -> None:
    await _webhook(api, "acme-hook", tenant="acme")
    await api.client.post(
        "/v1/events", json={"kind": "a.b", "subject": "s", "tenant": "acme"}, headers=api.publish
    )
    (lease,) = (await _lease(api))["leases"]  # type: ignore[misc]
    ids = lease["messages"][0]["delivery_ids"]
    other = await _worker_token(api, tenants=["globex"])
    report = {"worker_id": "intruder", "token": lease["token"], "results": [_result(ids)]}
    answer = await api.client.post("/v1/worker/report", json=report, headers=other)
    assert answer.json() == {"recorded": 0, "fenced": 1}
    detail = (await api.client.get(f"/v1/deliveries/{ids[0]}", headers=api.read)).json()
    assert detail["state"] == State.SENDING.value
