"""Screenshots of the admin UI for the README, from realistic demo data.

Run from the repository root: `.venv/bin/python docs/screenshots.py` (needs /usr/bin/chromium).
It backfills a day of history through the store's own transitions, starts a real
`tidings serve` on it with a local HTTP receiver, publishes a few live events, and writes
PNGs into docs/screenshots/.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

import tidings  # noqa: E402
from tests.api.server import Served, serve  # noqa: E402
from tests.sink import Answer, Sink  # noqa: E402
from tests.web.browser import LAUNCH_ARGS  # noqa: E402
from tidings.core import validate  # noqa: E402
from tidings.core.model import AttemptRecord, Channel  # noqa: E402
from tidings.core.states import AttemptStatus  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
DEMO_SECRET = "whsec_" + "ZGVtby1zaWduaW5nLWtleS1mb3ItdGlkaW5ncw=="
MONITORS = ["api.example.com", "checkout", "search", "auth-gateway", "cdn-edge", "billing-db"]
FINDINGS = [
    "SQL injection in /api/orders?sort=",
    "Outdated OpenSSL 1.1.1 on build-07",
    "S3 bucket logs-archive is public",
    "Leaked AWS key in repo infra-tools",
    "XSS in profile bio field",
]


async def backfill(db_url: str, sink: Sink) -> None:
    rng = random.Random(7)
    async with tidings.Hub(db_url) as hub:
        await hub.migrate()
        create = hub.channels.create
        ops = await create(
            name="ops-webhook",
            kind="webhook",
            rate_per_min=0,
            config={"url": sink.url("/hook"), "secret": DEMO_SECRET},
            filter={"kinds": ["monitor.*", "finding.*"]},
        )
        slack = await create(
            name="team-slack",
            kind="slack",
            rate_per_min=0,
            config={"webhook_url": sink.url("/slack")},
            filter={"min_severity": "high"},
        )
        await create(
            name="sec-wecom",
            kind="wecom",
            mode="digest",
            digest_period_s=3600,
            config={"webhook_url": sink.url("/wecom?key=demo")},
            filter={"kinds": ["finding.created"]},
        )
        # Its failures escalate to Slack (F1), and its receiver's 503s open its breaker (H1).
        await create(
            name="billing-webhook",
            kind="webhook",
            fallback_channel_id=slack.id,
            max_attempts=2,
            retry_backoff_s=0.2,
            config={"url": sink.url("/billing")},
            filter={"kinds": ["invoice.*"]},
        )
        await create(name="inbox", kind="inbox", filter={"kinds": ["deploy.*"]})
        legacy = await create(
            name="legacy-teams",
            kind="teams",
            config={"webhook_url": sink.url("/teams")},
            filter={"kinds": ["never.*"]},
        )
        await hub.channels.disable(legacy.id, "replaced by team-slack")
        now = datetime.now(UTC)
        for hours_ago in range(23, 0, -1):
            at = now - timedelta(hours=hours_ago, minutes=rng.randint(0, 50))
            for _ in range(rng.randint(2, 7)):
                down = rng.random() < 0.6
                name = rng.choice(MONITORS if down else FINDINGS)
                fields: dict[str, Any] = (
                    {
                        "kind": "monitor.down",
                        "subject": f"monitor:{name}",
                        "severity": rng.choice(["high", "critical"]),
                        "title": f"{name} is down",
                        "body": "3 of 3 probes failed (timeout after 10 s).",
                    }
                    if down
                    else {
                        "kind": "finding.updated",
                        "subject": f"finding:{rng.randint(1000, 9999)}",
                        "severity": rng.choice(["medium", "high", "critical"]),
                        "title": name,
                    }
                )
                await hub.store.publish([validate.event_input(**fields)], now=at)
            later = at + timedelta(seconds=2)
            for channel in (ops, slack):
                await settle(hub, channel, later, rng)


async def settle(hub: tidings.Hub, channel: Channel, at: datetime, rng: random.Random) -> None:
    claim = await hub.store.claim_realtime(channel.id, 100, 60.0, "demo-host:4121", now=at)
    if claim is None:
        return
    for delivery_id in claim.ids:
        took = timedelta(milliseconds=rng.randint(40, 400))
        if rng.random() < 0.12:
            record = AttemptRecord(
                delivery_id,
                "demo-host:4121",
                AttemptStatus.PERMANENT,
                at,
                at + took,
                error="HTTP 404: no_service",
                provider_response="no_service",
            )
            await hub.store.fail(
                claim.token,
                [delivery_id],
                "HTTP 404: no_service",
                [record],
                now=at + took,
            )
        else:
            record = AttemptRecord(
                delivery_id,
                "demo-host:4121",
                AttemptStatus.DELIVERED,
                at,
                at + took,
                provider_response="ok",
            )
            await hub.store.mark_sent(claim.token, [delivery_id], [record], now=at + took)


def live_events(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.token}"}
    events = [
        {
            "kind": "deploy.finished",
            "subject": "service:checkout",
            "severity": "info",
            "title": "checkout v2.14.3 deployed to prod",
            "body": "12 commits by 4 authors; canary healthy for 10 min.",
            "url": "https://ci.example.com/runs/8812",
            "labels": {"env": "prod"},
        },
        {
            "kind": "deploy.failed",
            "subject": "service:search",
            "severity": "high",
            "title": "search v5.0.0 rollout halted",
            "body": "Error rate 7.2% > 2% on canary; rolled back to v4.9.8.",
        },
        {
            "kind": "invoice.overdue",
            "subject": "customer:acme",
            "severity": "medium",
            "title": "Invoice INV-2024-0113 is 14 days overdue",
            "body": "ACME Corp owes 4,200.00 EUR.",
            "data": {"invoice": "INV-2024-0113"},
        },
        {
            "kind": "finding.created",
            "subject": "finding:8812",
            "severity": "critical",
            "title": "RCE in image-resizer (CVE-2024-3094)",
            "body": "xz-utils 5.6.0 in base image; upgrade to 5.6.2.",
        },
        {
            "kind": "finding.created",
            "subject": "finding:8813",
            "severity": "high",
            "title": "Admin panel reachable without MFA",
        },
        {
            "kind": "monitor.down",
            "subject": "monitor:api.example.com",
            "severity": "critical",
            "title": "api.example.com is down",
            "body": "HTTP 503 from 3 regions.",
            "labels": {"env": "prod", "team": "platform"},
        },
    ]
    for event in events:
        response = httpx.post(f"{served.base_url}/v1/events", json=event, headers=headers)
        response.raise_for_status()
        time.sleep(0.2)
    for n in (114, 115):  # with the first, six failures in a row: the breaker opens
        overdue = {
            "kind": "invoice.overdue",
            "subject": "customer:globex",
            "severity": "high",
            "title": f"Invoice INV-2024-0{n} is 30 days overdue",
            "data": {"invoice": f"INV-2024-0{n}"},
        }
        httpx.post(f"{served.base_url}/v1/events", json=overdue, headers=headers)
    # The billing webhook's attempts fail and escalate, until its breaker opens.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = httpx.get(f"{served.base_url}/v1/channels/health", headers=headers).json()
        if any(
            b["channel_name"] == "billing-webhook" and b["breaker"] == "open"
            for b in found["items"]
        ):
            break
        time.sleep(0.2)
    time.sleep(1.0)  # the escalated copies are sent


def shoot(page: Page, path: str, name: str, full: bool = False) -> None:
    page.goto(path)
    page.wait_for_load_state("networkidle")
    target = OUT / f"{name}.png"
    page.screenshot(path=str(target), full_page=full)
    print(f"{target.relative_to(ROOT)}: {target.stat().st_size // 1024} KB")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Sink() as sink:
        workdir = Path(tmp)
        sink.default("/billing", Answer(503, "Service Unavailable: billing API in maintenance"))
        sink.default("/wecom", Answer(200, {"errcode": 0, "errmsg": "ok"}))
        asyncio.run(backfill(f"sqlite:///{workdir / 'tidings.db'}", sink))
        served = serve(workdir)
        try:
            live_events(served)
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path="/usr/bin/chromium", headless=True, args=LAUNCH_ARGS
                )
                context = browser.new_context(
                    base_url=served.base_url, viewport={"width": 1360, "height": 900}
                )
                page = context.new_page()
                page.goto("/ui/login")
                page.fill("#token", served.token)
                page.click("button[type=submit]")
                page.wait_for_url("**/ui/")
                shoot(page, "/ui/", "dashboard", full=True)
                shoot(page, "/ui/deliveries", "deliveries")
                page.goto("/ui/deliveries?state=failed&kind=invoice.overdue")
                page.click("tbody tr td.title a")
                shoot(page, page.url.removeprefix(served.base_url), "delivery", full=True)
                page.goto("/ui/deliveries?state=failed")
                page.click("#bulk-resend")
                shoot(page, page.url.removeprefix(served.base_url), "bulk-resend")
                shoot(page, "/ui/channels", "channels")
                shoot(page, "/ui/inbox", "inbox")
                page.goto("/ui/channels")
                page.click("tr[data-channel='ops-webhook'] a:has-text('Edit')")
                shoot(page, page.url.removeprefix(served.base_url), "channel-form", full=True)
                context.close()
                browser.close()
        finally:
            served.stop()


if __name__ == "__main__":
    main()
