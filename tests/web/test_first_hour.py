"""What the admin UI tells a new user: an event that matched no channel says so on its page,
and a channel saved with a destination the address guard refuses is explained at once."""

from __future__ import annotations

from tests.web.conftest import Ui
from tests.web.test_channels import webhook_form

XSS = "<script>alert(1)</script>"


async def test_an_event_no_channel_matched_says_so(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    await hub.channels.create(name="findings", kind="inbox", filter={"kinds": ["finding.*"]})
    await hub.channels.create(name="prod", kind="inbox", filter={"labels": {"env": "prod"}})
    lonely = await hub.publish(kind="monitor.down", subject="web-1", title=XSS)
    page = await logged_in.client.get(f"/ui/events/{lonely.event.id}")
    assert page.status_code == 200
    assert "No channel matched this event" in page.text
    assert "2 channels checked" in page.text
    assert XSS not in page.text  # escaped like every value from events

    matched = await hub.publish(kind="finding.created", subject="f:1", title="finding")
    page = await logged_in.client.get(f"/ui/events/{matched.event.id}")
    assert "No channel matched" not in page.text
    (delivery,) = matched.deliveries
    assert f'href="/ui/deliveries/{delivery.id}"' in page.text
    assert "findings" in page.text
    detail = await logged_in.client.get(f"/ui/deliveries/{delivery.id}")
    assert f'href="/ui/events/{matched.event.id}"' in detail.text

    assert (await logged_in.client.get("/ui/events/999999")).status_code == 404


async def test_a_loopback_target_is_explained_when_saved(logged_in: Ui) -> None:
    response = await logged_in.post("/ui/channels/new", webhook_form("http://127.0.0.1:9/hook"))
    assert response.status_code == 303
    page = await logged_in.client.get(response.headers["location"])
    assert "channel-warning" in page.text
    assert "127.0.0.1 is a loopback address" in page.text
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in page.text
    public = await logged_in.post(
        "/ui/channels/new", webhook_form("https://93.184.215.14/hook", name="public-hook")
    )
    assert "channel-warning" not in (await logged_in.client.get(public.headers["location"])).text
