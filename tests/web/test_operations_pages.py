"""H1 and F1 in the admin UI: a paused channel shows its breaker, a fallback is chosen in the
form, and a delivery page shows where a failure escalated."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.web.conftest import Ui
from tidings.core.breaker import Policy


async def test_h1_the_channel_list_shows_a_paused_channel(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    down = await hub.channels.create(name="down", kind="inbox")
    await hub.channels.create(name="fine", kind="inbox")
    await hub.store.record_health(
        down.id, False, 5, "HTTP 503: <b>busy</b>", Policy(), now=datetime.now(UTC)
    )
    page = await logged_in.client.get("/ui/channels")
    assert page.status_code == 200
    assert 'data-breaker="open"' in page.text
    assert "paused after 5 failures" in page.text
    assert "HTTP 503: &lt;b&gt;busy&lt;/b&gt;" in page.text  # escaped
    assert page.text.count("data-breaker=") == 1


async def test_f1_a_fallback_is_chosen_in_the_form_and_the_chain_shown(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    email = await hub.channels.create(name="email", kind="inbox", filter={"kinds": ["none"]})
    form = {"kind": "inbox", "name": "robot", "mode": "realtime", "enabled": "1"}
    created = await logged_in.post(
        "/ui/channels/new", form | {"fallback_channel_id": str(email.id)}
    )
    assert created.status_code == 303, created.text
    robot = await hub.channels.get_by_name("robot")
    assert robot.fallback_channel_id == email.id
    edit = await logged_in.client.get(f"/ui/channels/{robot.id}/edit")
    assert f'<option value="{email.id}" selected>email</option>' in edit.text
    refused = await logged_in.post(
        f"/ui/channels/{email.id}/edit",
        {
            "kind": "inbox",
            "name": "email",
            "mode": "realtime",
            "fallback_channel_id": str(robot.id),
        },
    )
    assert refused.status_code == 422
    assert "cycle" in refused.text
    (published,) = await hub.publish_many([{"kind": "app.down", "subject": "web-1"}])
    claim = await hub.store.claim_realtime(robot.id, 10, 60, "w")
    assert claim is not None
    await hub.store.fail(claim.token, claim.ids, "HTTP 404")
    page = await logged_in.client.get(f"/ui/deliveries/{claim.ids[0]}")
    assert 'id="fallback-chain"' in page.text
    assert "Its failure escalated to" in page.text
    escalated = [d for d in (await hub.get_event(published.event.id)).deliveries if d.fallback_of]
    (row,) = escalated
    chained = await logged_in.client.get(f"/ui/deliveries/{row.id}")
    assert f'Escalated from <a href="/ui/deliveries/{claim.ids[0]}"' in chained.text
