"""The public surface of tidings.render, and the event view templates get."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import tidings.render
from tests.render.samples import make_channel, make_event
from tidings.core.model import Severity
from tidings.render.context import channel_context, event_context, rfc3339


def test_all_is_curated() -> None:
    assert sorted(tidings.render.__all__) == sorted(
        [
            "Flavour",
            "RenderError",
            "Renderer",
            "TEMPLATE_NAMES",
            "default_renderer",
            "remembering_entries",
        ]
    )
    for name in tidings.render.__all__:
        assert hasattr(tidings.render, name)
    assert tidings.render.TEMPLATE_NAMES == (
        "event",
        "digest_header",
        "digest_entry",
        "digest_footer",
    )
    assert [f.value for f in tidings.render.Flavour] == [
        "text",
        "html",
        "wecom_markdown",
        "dingtalk_markdown",
        "feishu_markdown",
        "slack_mrkdwn",
        "teams_markdown",
        "discord_markdown",
        "telegram_markdown_v2",
    ]


def test_rfc3339_is_utc_with_z() -> None:
    plus8 = timezone(timedelta(hours=8))
    assert rfc3339(datetime(2024, 5, 1, 20, 0, tzinfo=plus8)) == "2024-05-01T12:00:00Z"
    assert rfc3339(datetime(2024, 5, 1, 12, 0, 0, 5000)) == "2024-05-01T12:00:00.005000Z"


def test_event_context_is_a_plain_copy() -> None:
    event = make_event(severity=Severity.CRITICAL, url="javascript:alert(1)")
    view = event_context(event)
    assert view["severity"] == "critical"
    assert type(view["severity"]) is str
    assert view["url"] is None
    assert view["labels"] == event.labels
    assert view["labels"] is not event.labels
    assert channel_context(make_channel()) == {"id": 7, "name": "ops", "kind": "inbox"}
