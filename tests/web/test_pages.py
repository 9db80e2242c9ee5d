"""Every page on an empty and a populated database; history filters, paging, resend, bulk
resend; and escaping of whatever events and providers send."""

from __future__ import annotations

import re

import pytest

from tests.web import data
from tests.web.conftest import Ui
from tidings.core.model import DeliveryQuery
from tidings.core.states import State
from tidings.web import deliveries

XSS = "<script>alert(1)</script>"
PAGES = ["/ui/", "/ui/deliveries", "/ui/channels", "/ui/inbox", "/ui/channels/new"]


@pytest.mark.parametrize("path", PAGES)
async def test_pages_render_on_an_empty_database(logged_in: Ui, path: str) -> None:
    response = await logged_in.client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<script>" not in response.text.replace('<script src="/ui/static/app.js" defer>', "")


async def test_the_form_of_every_kind_renders(logged_in: Ui) -> None:
    for kind in logged_in.service.registry.kinds():
        response = await logged_in.client.get("/ui/channels/new", params={"kind": kind})
        assert response.status_code == 200, kind
        assert f'name="kind" value="{kind}"' in response.text


async def populate(ui: Ui) -> dict[str, int]:
    hub = ui.service.hub
    failing = await data.webhook(hub, "pager-hook")
    working = await data.webhook(hub, "chat-hook")
    await hub.channels.create(name="inbox", kind="inbox")
    await data.publish(hub, "api latency high", kind="monitor.down", n=3)
    await data.publish(hub, "new finding", kind="finding.created", n=2)
    failed = await data.settle(hub, failing, fail=True)
    sent = await data.settle(hub, working, fail=False)
    return {"failing": failing.id, "working": working.id, "failed": failed, "sent": sent}


@pytest.mark.parametrize("path", PAGES)
async def test_pages_render_on_a_populated_database(logged_in: Ui, path: str) -> None:
    await populate(logged_in)
    response = await logged_in.client.get(path)
    assert response.status_code == 200


async def test_dashboard_counts_and_channel_health(logged_in: Ui) -> None:
    await populate(logged_in)
    page = (await logged_in.client.get("/ui/")).text
    assert re.search(r'tile-count">5<.*?tile-label">sent', page, re.S)
    assert re.search(r'tile-count">5<.*?tile-label">failed', page, re.S)
    assert re.search(r'tile-count">5<.*?tile-label">pending', page, re.S)  # the inbox's
    assert "<svg" in page
    assert "<rect" in page
    assert "style=" not in page
    health = await logged_in.service.hub.store.channel_health()
    channels = {c.name: c.id for c in await logged_in.service.hub.channels.list()}
    assert health[channels["pager-hook"]].failures_last_hour == 5
    assert health[channels["chat-hook"]].last_success_at is not None
    assert health[channels["inbox"]].pending == 5
    assert health[channels["inbox"]].oldest_pending_at is not None
    buckets = await logged_in.service.hub.store.hourly_attempts(24)
    assert len(buckets) == 24
    assert (buckets[-1].sent, buckets[-1].failed) == (5, 5)


def ids_in(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr class="state-\w+" data-id="(\d+)"', html)]


async def test_history_filters_and_pages(logged_in: Ui) -> None:
    ids = await populate(logged_in)
    client = logged_in.client
    everything = ids_in((await client.get("/ui/deliveries")).text)
    assert len(everything) == 15
    assert everything == sorted(everything, reverse=True)
    failed = ids_in((await client.get("/ui/deliveries", params={"state": "failed"})).text)
    assert len(failed) == 5
    one_channel = await client.get(
        "/ui/deliveries", params={"channel": ids["failing"], "kind": "finding.created"}
    )
    assert len(ids_in(one_channel.text)) == 2
    future = await client.get("/ui/deliveries", params={"since": "2999-01-01T00:00"})
    assert ids_in(future.text) == []
    assert "No deliveries match" in future.text
    past = await client.get("/ui/deliveries", params={"until": "2000-01-01T00:00"})
    assert ids_in(past.text) == []
    first = await client.get("/ui/deliveries", params={"page_size": 4})
    second = await client.get("/ui/deliveries", params={"page_size": 4, "page": 2})
    assert ids_in(first.text) == everything[:4]
    assert ids_in(second.text) == everything[4:8]
    assert "page 1 of 4" in first.text
    assert 'rel="next"' in first.text
    bad = await client.get("/ui/deliveries", params={"state": "bogus", "since": "soon"})
    assert bad.status_code == 200
    assert len(ids_in(bad.text)) == 15
    assert "Ignored filter" in bad.text


async def test_history_with_many_channels_takes_a_channel_typed_in(
    logged_in: Ui, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond CHANNEL_CHOICES_MAX channels the filter is a text field for a name or an id,
    not a list of every channel; a name that is no channel's is said, and ignored."""
    ids = await populate(logged_in)
    client = logged_in.client
    listed = (await client.get("/ui/deliveries")).text
    assert '<select name="channel">' in listed
    monkeypatch.setattr(deliveries, "CHANNEL_CHOICES_MAX", 2)
    typed = (await client.get("/ui/deliveries")).text
    assert '<select name="channel">' not in typed
    assert '<input name="channel" value=""' in typed
    by_id = await client.get("/ui/deliveries", params={"channel": ids["failing"]})
    by_name = await client.get("/ui/deliveries", params={"channel": " pager-hook "})
    assert len(ids_in(by_name.text)) == 5
    assert ids_in(by_name.text) == ids_in(by_id.text)
    assert 'name="channel" value="pager-hook"' in by_name.text
    # links made from the filter (the bulk resend's, the pages') name the channel by id
    assert f"resend-failed?channel={ids['failing']}" in by_name.text
    for unknown, said in (
        ("nobody", "no channel is named"),
        (XSS, "no channel is named"),
        ("a\x00b", "must not contain NUL"),
        ("x" * 10_000, "no channel is named"),
    ):
        answer = await client.get("/ui/deliveries", params={"channel": unknown})
        assert answer.status_code == 200
        assert len(ids_in(answer.text)) == 15
        assert f"Ignored filter — channel: {said}" in answer.text
        assert XSS not in answer.text


def _link(html: str, rel: str) -> str | None:
    found = re.search(rf'href="([^"]+)" rel="{rel}"', html)
    return found.group(1).replace("&amp;", "&") if found else None


async def test_history_pages_by_cursor_links_older_and_back_newer(logged_in: Ui) -> None:
    await populate(logged_in)
    client = logged_in.client
    everything = ids_in((await client.get("/ui/deliveries")).text)
    page = (await client.get("/ui/deliveries", params={"page_size": 4, "state": ""})).text
    pages = [ids_in(page)]
    while (older := _link(page, "next")) is not None:
        assert "cursor=" in older
        page = (await client.get(older)).text
        pages.append(ids_in(page))
        assert f"page {len(pages)} of 4" in page
    assert [i for p in pages for i in p] == everything
    back = [ids_in(page)]
    while (newer := _link(page, "prev")) is not None:
        page = (await client.get(newer)).text
        back.append(ids_in(page))
    assert back[::-1] == pages
    bad = await client.get("/ui/deliveries", params={"cursor": "bogus"})
    assert bad.status_code == 200
    assert "Ignored filter — cursor:" in bad.text
    assert ids_in(bad.text) == everything


async def test_the_live_partial_carries_only_the_live_regions(logged_in: Ui) -> None:
    await populate(logged_in)
    partial = await logged_in.client.get("/ui/deliveries", params={"partial": 1, "state": "sent"})
    assert 'id="rows" data-live' in partial.text
    assert "<header" not in partial.text
    assert len(ids_in(partial.text)) == 5


async def test_detail_shows_the_event_message_and_attempts(logged_in: Ui) -> None:
    await populate(logged_in)
    hub = logged_in.service.hub
    row = (await hub.deliveries()).items[-1]
    assert row.delivery.state == State.FAILED
    page = await logged_in.client.get(f"/ui/deliveries/{row.delivery.id}")
    assert page.status_code == 200
    assert "api latency high" in page.text
    assert "upstream exploded" in page.text  # the provider response of the attempt
    assert "37 ms" in page.text
    assert "&#34;type&#34;: &#34;event&#34;" in page.text  # the webhook body, rendered
    assert 'id="resend"' in page.text


async def test_resend_from_the_detail_page(logged_in: Ui) -> None:
    await populate(logged_in)
    hub = logged_in.service.hub
    failed = (await hub.deliveries()).items[-1].delivery
    path = f"/ui/deliveries/{failed.id}/resend"
    response = await logged_in.post(path, {"request_id": "req-1"})
    assert response.status_code == 303
    assert response.headers["location"] == f"/ui/deliveries/{failed.id}?resent=requeued"
    after = (await hub.delivery(failed.id)).view.delivery
    assert after.state == State.PENDING
    assert after.attempts == 0
    page = await logged_in.client.get(response.headers["location"])
    assert "Resent: the delivery is pending again" in page.text
    again = await logged_in.post(path, {"request_id": "req-1"})
    assert again.headers["location"].endswith("resent=already")
    refused = await logged_in.post(path, {"request_id": "req-2"})
    assert refused.status_code == 409
    assert "alert-error" in refused.text


async def test_bulk_resend_previews_the_count_then_requeues(logged_in: Ui) -> None:
    ids = await populate(logged_in)
    client = logged_in.client
    preview = await client.get(
        "/ui/deliveries/resend-failed", params={"channel": ids["failing"], "kind": "monitor.down"}
    )
    assert 'data-count="3"' in preview.text
    batch_id = re.search(r'name="batch_id" value="(\w+)"', preview.text)
    assert batch_id is not None
    form = {"channel": str(ids["failing"]), "kind": "monitor.down", "batch_id": batch_id[1]}
    done = await logged_in.post("/ui/deliveries/resend-failed", form)
    assert 'data-requeued="3"' in done.text
    hub = logged_in.service.hub
    page = await hub.deliveries(DeliveryQuery(channel_id=ids["failing"]))
    states = sorted(v.delivery.state.value for v in page.items)
    assert states == ["failed", "failed", "pending", "pending", "pending"]
    empty = await client.get("/ui/deliveries/resend-failed", params={"kind": "monitor.down"})
    assert 'data-count="0"' in empty.text


async def test_script_titles_are_escaped_everywhere(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    inbox = await hub.channels.create(name="inbox", kind="inbox")
    hook = await data.webhook(hub, f"hook-{XSS}")
    await hub.publish(
        kind="finding.created", subject='x"><img src=x onerror=alert(1)>', title=XSS, body=XSS
    )
    await data.settle(hub, hook, fail=True, error=XSS)
    await hub.store.inbox_put(inbox.id, "m1", None, [1], XSS, XSS)
    pages = ["/ui/deliveries", "/ui/channels", "/ui/inbox", "/ui/deliveries/1", "/ui/deliveries/2"]
    for path in pages:
        html = (await logged_in.client.get(path)).text
        assert "<script>alert" not in html, path
        assert "<img src=x" not in html, path
    detail = (await logged_in.client.get("/ui/deliveries/2")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
