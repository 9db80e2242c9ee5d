"""/v1/channels: CRUD, redaction of secrets, enable/disable, test sends, and bad input."""

from __future__ import annotations

from tests.api.conftest import Api
from tests.conftest import count
from tests.sink import Answer, Sink

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="


async def test_create_read_update_delete_with_secrets_redacted(api: Api) -> None:
    body = {
        "name": "hook",
        "kind": "webhook",
        "config": {"url": "https://example.invalid/hook", "secret": SECRET},
    }
    created = await api.client.post("/v1/channels", json=body, headers=api.admin)
    assert created.status_code == 201, created.text
    shown = created.json()
    assert shown["config"]["secret"] == "••••" + SECRET[-4:]
    assert SECRET not in created.text
    channel_id = shown["id"]

    listed = await api.client.get("/v1/channels", headers=api.read)
    assert SECRET not in listed.text
    assert [c["name"] for c in listed.json()["items"]] == ["hook"]
    paged = await api.client.get("/v1/channels", params={"limit": 1, "q": "ho"}, headers=api.read)
    assert [c["name"] for c in paged.json()["items"]] == ["hook"]
    assert SECRET not in paged.text
    assert paged.json()["items"][0]["config"]["secret"] == "••••" + SECRET[-4:]

    # an edit form sends the redacted secret back: the stored one is kept
    patched = await api.client.patch(
        f"/v1/channels/{channel_id}",
        json={"config": shown["config"] | {"url": "https://example.invalid/v2"}, "max_attempts": 5},
        headers=api.admin,
    )
    assert patched.status_code == 200, patched.text
    stored = await api.service.hub.channels.get(channel_id)
    assert stored.config["secret"] == SECRET
    assert stored.config["url"] == "https://example.invalid/v2"
    assert stored.max_attempts == 5

    deleted = await api.client.delete(f"/v1/channels/{channel_id}", headers=api.admin)
    assert deleted.status_code == 204
    missing = await api.client.get(f"/v1/channels/{channel_id}", headers=api.read)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


async def test_bad_channel_input_is_refused_and_changes_nothing(api: Api) -> None:
    cases = [
        ({"name": "x", "kind": "carrier-pigeon"}, "kind"),
        ({"name": "x", "kind": "webhook", "config": {}}, "config.url"),
        (
            {
                "name": "x",
                "kind": "webhook",
                "config": {"url": "https://a.invalid", "secret": "whsec_%%%"},
            },
            "secret",
        ),
        ({"name": "x", "kind": "inbox", "filter": {"kinds": "finding.*"}}, "filter"),
        ({"name": "x", "kind": "inbox", "timeout_s": 60}, "timeout_s"),
        ({"name": "x", "kind": "inbox", "mode": "hourly"}, "mode"),
        ({"name": "", "kind": "inbox"}, "name"),
    ]
    for body, field in cases:
        response = await api.client.post("/v1/channels", json=body, headers=api.admin)
        assert response.status_code == 422, (body, response.text)
        assert field in response.json()["error"]["message"], (body, response.text)
        assert "%%%" not in response.text
    assert await count(api.service.hub, "channels") == 0


async def test_duplicate_name_is_409(api: Api) -> None:
    body = {"name": "ops", "kind": "inbox"}
    assert (await api.client.post("/v1/channels", json=body, headers=api.admin)).status_code == 201
    again = await api.client.post("/v1/channels", json=body, headers=api.admin)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"


async def test_disable_skips_pending_and_enable_does_not_revive(api: Api) -> None:
    created = await api.client.post(
        "/v1/channels", json={"name": "ops", "kind": "inbox"}, headers=api.admin
    )
    channel_id = created.json()["id"]
    await api.client.post("/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish)
    disabled = await api.client.post(f"/v1/channels/{channel_id}/disable", headers=api.admin)
    assert disabled.json()["enabled"] is False
    enabled = await api.client.post(f"/v1/channels/{channel_id}/enable", headers=api.admin)
    assert enabled.json()["enabled"] is True
    page = (await api.client.get("/v1/deliveries", headers=api.read)).json()
    assert [(d["state"], d["skip_reason"]) for d in page["items"]] == [
        ("skipped", "channel_disabled")
    ]


async def test_test_send_returns_the_classified_outcome(api: Api, sink: Sink) -> None:
    api.service.allowed_networks = __import__(
        "tidings.channels.netguard", fromlist=["parse_networks"]
    ).parse_networks("127.0.0.0/8")
    sink.script("/hook", Answer(200), Answer(403, "bad token"))
    created = await api.client.post(
        "/v1/channels",
        json={"name": "hook", "kind": "webhook", "config": {"url": sink.url("/hook")}},
        headers=api.admin,
    )
    channel_id = created.json()["id"]
    ok = await api.client.post(f"/v1/channels/{channel_id}/test", headers=api.admin)
    assert ok.json() == {"outcome": "delivered", "error": None, "provider_response": "ok"}
    refused = await api.client.post(f"/v1/channels/{channel_id}/test", headers=api.admin)
    assert refused.json()["outcome"] == "permanent"
    assert refused.json()["error"] == "HTTP 403: bad token"
    assert sink.count("/hook") == 2
    assert await count(api.service.hub, "deliveries") == 0


async def test_template_overrides_are_validated_when_saved(api: Api) -> None:
    bad = {"name": "x", "kind": "inbox", "templates": {"event": "{% if %}"}}
    refused = await api.client.post("/v1/channels", json=bad, headers=api.admin)
    assert refused.status_code == 422
    assert "templates.event" in refused.json()["error"]["message"]
    escape = {"name": "x", "kind": "inbox", "templates": {"event": "{{ ''.__class__.__mro__ }}"}}
    assert (
        await api.client.post("/v1/channels", json=escape, headers=api.admin)
    ).status_code == 422
    good = {"name": "x", "kind": "inbox", "templates": {"event": "ALERT {{ event.title }}"}}
    created = await api.client.post("/v1/channels", json=good, headers=api.admin)
    assert created.status_code == 201, created.text
    assert created.json()["templates"] == {"event": "ALERT {{ event.title }}"}
    assert await count(api.service.hub, "channels") == 1


async def test_a_refused_destination_is_explained_when_saved(api: Api) -> None:
    body = {"name": "local", "kind": "webhook", "config": {"url": "http://127.0.0.1:9/hook"}}
    created = await api.client.post("/v1/channels", json=body, headers=api.admin)
    assert created.status_code == 201, created.text
    (warning,) = created.json()["warnings"]
    assert warning.startswith("config.url: sends will be refused: 127.0.0.1 is a loopback address")
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS (e.g. 127.0.0.1/32)" in warning
    moved = await api.client.patch(
        f"/v1/channels/{created.json()['id']}",
        json={"config": {"url": "https://93.184.215.14/hook"}},
        headers=api.admin,
    )
    assert moved.json()["warnings"] == []
    read = await api.client.get(f"/v1/channels/{created.json()['id']}", headers=api.read)
    assert "warnings" not in read.json()


async def test_the_list_pages_by_id_and_finds_by_name(api: Api) -> None:
    for name in ("a-ops", "b-ops", "c-dev", "d_ops", "e-ops"):
        created = await api.client.post(
            "/v1/channels", json={"name": name, "kind": "inbox"}, headers=api.admin
        )
        assert created.status_code == 201, created.text

    async def page(**params: object) -> tuple[list[str], int | None]:
        answer = await api.client.get("/v1/channels", params=params, headers=api.read)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        return [c["name"] for c in body["items"]], body["next_after"]

    everything, last = await page()
    assert (everything, last) == (["a-ops", "b-ops", "c-dev", "d_ops", "e-ops"], None)
    names, after = await page(limit=2)
    assert names == ["a-ops", "b-ops"]
    seen = list(names)
    while after is not None:
        names, after = await page(limit=2, after=after)
        seen += names
    assert seen == everything
    assert await page(limit=5) == (everything, None)  # the last page says so
    assert await page(q="OPS", limit=2) == (["a-ops", "b-ops"], (await page(limit=2))[1])
    assert (await page(q="_"))[0] == ["d_ops"]  # a name's text, not a pattern
    assert await page(q="nothing") == ([], None)


async def test_bad_list_parameters_are_refused(api: Api) -> None:
    for params, field in (
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"after": -1}, "after"),
        ({"q": "x" * 101}, "q"),
    ):
        answer = await api.client.get("/v1/channels", params=params, headers=api.read)
        assert answer.status_code == 422, (params, answer.text)
        assert field in answer.json()["error"]["message"], answer.text
    refused = await api.client.get("/v1/channels", params={"limit": 1})
    assert refused.status_code == 401
