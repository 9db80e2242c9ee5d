"""S2–S4 through the API: reads mask every secret part, a kept secret stays bound to its
destination, a remote worker's report is scrubbed server-side, and a signing secret rotates
with an overlap in which both secrets sign (checked as a Standard Webhooks receiver does)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.api.conftest import Api
from tests.sink import Sink
from tidings.channels import signing
from tidings.channels.netguard import parse_networks
from tidings.core.redact import MASK

CANARY = "cAnArY7319"
WHSEC = signing.new_secret()
URL = f"https://bot:pw-{CANARY}@hooks.invalid/in?token=tok-{CANARY}&page=2"


async def _create(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.client.post("/v1/channels", json=body, headers=api.admin)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _webhook(api: Api, url: str = URL, **config: Any) -> dict[str, Any]:
    headers = {"X-Api-Key": f"Bearer bearer-{CANARY}"}
    body = {"url": url, "secret": WHSEC, "headers": headers} | config
    return await _create(api, {"name": "hook", "kind": "webhook", "config": body})


async def test_s2_a_read_token_sees_no_part_of_a_webhook_secret(api: Api) -> None:
    created = await _webhook(api)
    for token in (api.read, api.admin):
        one = await api.client.get(f"/v1/channels/{created['id']}", headers=token)
        listed = await api.client.get("/v1/channels", headers=token)
        for text in (one.text, listed.text, json.dumps(created)):
            assert CANARY not in text
            assert WHSEC not in text
    config = one.json()["config"]
    assert config["url"].startswith("https://" + MASK)
    assert "@hooks.invalid/in?token=" + MASK in config["url"]
    assert config["headers"]["X-Api-Key"].startswith(MASK)


async def test_s2_the_read_sent_back_keeps_every_stored_secret(api: Api) -> None:
    created = await _webhook(api)
    patched = await api.client.patch(
        f"/v1/channels/{created['id']}",
        json={"config": created["config"], "name": "renamed"},
        headers=api.admin,
    )
    assert patched.status_code == 200, patched.text
    stored = await api.service.channel(created["id"])
    assert stored.config["url"] == URL
    assert stored.config["secret"] == WHSEC
    assert stored.config["headers"] == {"X-Api-Key": f"Bearer bearer-{CANARY}"}


async def test_s3_a_new_webhook_host_with_the_masks_sent_back_is_refused(api: Api) -> None:
    created = await _webhook(api)
    moved = created["config"] | {"url": created["config"]["url"].replace("hooks", "evil")}
    response = await api.client.patch(
        f"/v1/channels/{created['id']}", json={"config": moved}, headers=api.admin
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert "re-enter the secret for the new destination" in error["message"]
    assert "config.url" in error["message"]
    assert (await api.service.channel(created["id"])).config["url"] == URL


async def test_s3_telegram_api_base_cannot_take_the_stored_bot_token_along(api: Api) -> None:
    token = f"123456:{CANARY}-AAHdqTcvCH1vGWJxfSeofSAs0K5"
    created = await _create(
        api,
        {"name": "tg", "kind": "telegram", "config": {"bot_token": token, "chat_id": 42}},
    )
    moved = created["config"] | {"api_base": "https://collector.invalid"}
    response = await api.client.patch(
        f"/v1/channels/{created['id']}", json={"config": moved}, headers=api.admin
    )
    assert response.status_code == 422, response.text
    assert "config.api_base" in response.json()["error"]["message"]
    fresh = moved | {"bot_token": "654321:" + "B" * 30}  # re-entered: allowed
    response = await api.client.patch(
        f"/v1/channels/{created['id']}", json={"config": fresh}, headers=api.admin
    )
    assert response.status_code == 200, response.text


async def test_s3_email_host_and_security_are_destinations(api: Api) -> None:
    config = {
        "host": "mail.invalid",
        "username": "u",
        "password": f"pw-{CANARY}",
        "sender": "a@b.invalid",
        "recipients": ["c@d.invalid"],
    }
    created = await _create(api, {"name": "mail", "kind": "email", "config": config})
    for change in ({"host": "evil.invalid"}, {"security": "none"}, {"port": 2525}):
        response = await api.client.patch(
            f"/v1/channels/{created['id']}",
            json={"config": created["config"] | change},
            headers=api.admin,
        )
        assert response.status_code == 422, (change, response.text)


async def test_s2_a_remote_workers_report_is_scrubbed_by_the_server(api: Api) -> None:
    created = await _webhook(api)
    value, _ = await api.service.create_token("remote", ["worker"])
    worker = {"Authorization": f"Bearer {value}"}
    await api.client.post("/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish)
    leased = await api.client.post(
        "/v1/worker/lease", json={"worker_id": "remote-1"}, headers=worker
    )
    (lease,) = leased.json()["leases"]
    (message,) = lease["messages"]
    now = datetime.now(UTC)
    echo = f"refused {URL} with Bearer bearer-{CANARY} and tok-{CANARY}"
    result = {
        "delivery_ids": message["delivery_ids"],
        "status": "permanent",
        "error": echo,
        "provider_response": echo,
        "started_at": now.isoformat(),
        "finished_at": (now + timedelta(milliseconds=5)).isoformat(),
    }
    report = {"worker_id": "remote-1", "token": lease["token"], "results": [result]}
    answer = await api.client.post("/v1/worker/report", json=report, headers=worker)
    assert answer.json() == {"recorded": 1, "fenced": 0}
    detail = await api.client.get(f"/v1/deliveries/{message['delivery_ids'][0]}", headers=api.read)
    assert detail.json()["state"] == "failed"
    assert detail.json()["last_error"].startswith("refused")
    assert CANARY not in detail.text
    assert created["id"] == detail.json()["channel_id"]


async def test_rotate_secret_shows_it_once_and_both_secrets_sign(api: Api, sink: Sink) -> None:
    api.service.allowed_networks = parse_networks("127.0.0.0/8")
    created = await _webhook(api, url=sink.url("/hook"), headers={})
    path = f"/v1/channels/{created['id']}/rotate-secret"
    assert (await api.client.post(path, headers=api.read)).status_code == 403
    rotated = await api.client.post(path, json={"grace_s": 3600}, headers=api.admin)
    assert rotated.status_code == 200, rotated.text
    assert rotated.headers["cache-control"] == "no-store"
    fresh = rotated.json()["secret"]
    assert fresh.startswith("whsec_")
    assert fresh != WHSEC
    assert (
        fresh not in (await api.client.get(f"/v1/channels/{created['id']}", headers=api.admin)).text
    )

    tested = await api.client.post(f"/v1/channels/{created['id']}/test", headers=api.admin)
    assert tested.json()["outcome"] == "delivered", tested.text
    (request,) = sink.requests("/hook")
    assert len(request.headers["webhook-signature"].split()) == 2
    for secret in (fresh, WHSEC):  # a receiver on either secret accepts the message
        assert signing.verify(secret, request.headers, request.body, now=int(time.time()))

    await api.client.post(path, json={"grace_s": 0}, headers=api.admin)
    newest = (await api.service.channel(created["id"])).config["secret"]
    await api.client.post(f"/v1/channels/{created['id']}/test", headers=api.admin)
    last = sink.requests("/hook")[-1]
    assert len(last.headers["webhook-signature"].split()) == 1
    assert signing.verify(newest, last.headers, last.body, now=int(time.time()))
    assert not signing.verify(fresh, last.headers, last.body, now=int(time.time()))


async def test_rotate_secret_of_a_kind_without_one_is_refused(api: Api) -> None:
    created = await _create(api, {"name": "box", "kind": "inbox"})
    path = f"/v1/channels/{created['id']}/rotate-secret"
    response = await api.client.post(path, headers=api.admin)
    assert response.status_code == 422
    assert response.json()["error"]["code"]
