"""The default templates: every flavour renders an event and a digest, title first."""

from __future__ import annotations

import pytest

from tests.render.samples import make_channel, make_event
from tidings.core.model import Severity
from tidings.render import Flavour, Renderer, default_renderer
from tidings.render.flavours import escape, escape_url

RICH = make_event(
    title="Disk <almost> *full* on [db1]",
    subject="primary",
    body="95% used.\n# not a heading",
    labels={"env": "prod", "team": "dba"},
    data={"host": "db1"},
)


@pytest.fixture
def renderer() -> Renderer:
    return Renderer()


@pytest.mark.parametrize("flavour", list(Flavour))
def test_event_leads_with_title_then_severity_subject_body_url(
    renderer: Renderer, flavour: Flavour
) -> None:
    out = renderer.event(flavour, make_channel(), RICH)
    title = escape(flavour, RICH.title)
    assert title in out.splitlines()[0]
    positions = [
        out.index(title),
        out.index("HIGH"),
        out.index(escape(flavour, RICH.subject)),
        out.index(escape(flavour, "95% used.")),
        out.index(escape(flavour, "env=prod, team=dba")),
    ]
    assert positions == sorted(positions)
    url = RICH.url if flavour is Flavour.TEXT else escape_url(flavour, RICH.url or "")
    assert out.index(url) > positions[-1]
    assert "🟠" in out
    assert not out.endswith("\n")


@pytest.mark.parametrize("flavour", list(Flavour))
def test_event_fields_cannot_inject_markup(renderer: Renderer, flavour: Flavour) -> None:
    out = renderer.event(flavour, make_channel(), RICH)
    if flavour is not Flavour.TEXT:
        assert RICH.title not in out  # every value is escaped in a markup flavour
    if flavour not in (Flavour.TEXT, Flavour.HTML, Flavour.SLACK_MRKDWN):  # no headings there
        assert "\n# not a heading" not in out


def test_html_escapes_a_script_in_the_title(renderer: Renderer) -> None:
    event = make_event(title="<script>alert(1)</script>")
    out = renderer.event(Flavour.HTML, make_channel(), event)
    assert "<script>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert out.startswith("<h3>&lt;script&gt;")
    assert '<a href="https://status.example.com/incidents/42?tab=log&amp;x=(1)">' in out


def test_slack_and_telegram_link_shapes(renderer: Renderer) -> None:
    slack = renderer.event(Flavour.SLACK_MRKDWN, make_channel(), RICH)
    assert "<https://status.example.com/incidents/42?tab=log&amp;x=(1)|Open>" in slack
    assert slack.startswith("*Disk &lt;almost&gt;")
    telegram = renderer.event(Flavour.TELEGRAM_MARKDOWN_V2, make_channel(), RICH)
    assert "[Open](https://status.example.com/incidents/42?tab=log&x=(1\\))" in telegram
    assert telegram.startswith("*Disk <almost\\> \\*full\\* on \\[db1\\]*")


def test_wecom_colours_high_and_critical_only(renderer: Renderer) -> None:
    for severity in (Severity.HIGH, Severity.CRITICAL):
        out = renderer.event(Flavour.WECOM_MARKDOWN, make_channel(), make_event(severity=severity))
        assert out.startswith('### <font color="warning">Disk almost full</font>')
    for severity in (Severity.INFO, Severity.LOW, Severity.MEDIUM):
        out = renderer.event(Flavour.WECOM_MARKDOWN, make_channel(), make_event(severity=severity))
        assert out.startswith("### Disk almost full")
        assert 'color="warning"' not in out


@pytest.mark.parametrize("flavour", list(Flavour))
def test_kind_leads_when_there_is_no_title(renderer: Renderer, flavour: Flavour) -> None:
    event = make_event(title="", body="", url=None, labels={})
    out = renderer.event(flavour, make_channel(), event)
    assert escape(flavour, "db.disk_full") in out.splitlines()[0]
    assert "Open" not in out


def test_unsafe_url_is_not_linked(renderer: Renderer) -> None:
    event = make_event(url="javascript:alert(1)")
    for flavour in Flavour:
        assert "javascript" not in renderer.event(flavour, make_channel(), event)


def test_plain_text_event(renderer: Renderer) -> None:
    out = renderer.event(Flavour.TEXT, make_channel(), RICH)
    assert out == (
        "Disk <almost> *full* on [db1]\n"
        "🟠 HIGH · primary\n"
        "\n"
        "95% used.\n"
        "# not a heading\n"
        "\n"
        "env=prod, team=dba\n"
        "\n"
        "https://status.example.com/incidents/42?tab=log&x=(1)"
    )


# --- digests ----------------------------------------------------------------------------------

EVENTS = [make_event(id=i, title=f"Event number {i}", subject=f"host{i}") for i in (1, 2, 3)]


@pytest.mark.parametrize("flavour", list(Flavour))
def test_digest_of_three_part_two_of_three(renderer: Renderer, flavour: Flavour) -> None:
    channel = make_channel()
    out = renderer.digest(flavour, channel, EVENTS, part=2, parts=3)
    header = "Digest: 3 events (part 2/3)"
    if flavour is Flavour.TELEGRAM_MARKDOWN_V2:
        header = "Digest: 3 events \\(part 2/3\\)"
    assert header in out.splitlines()[0]
    positions = [out.index(f"Event number {i}") for i in (1, 2, 3)]
    assert positions == sorted(positions)
    assert "continued in part 3/3" in out
    pieces = out.split(renderer.separator(flavour))
    assert len(pieces) == 5
    assert pieces[1] == renderer.digest_entry(flavour, channel, EVENTS[0], index=1)
    assert pieces[-1] == renderer.digest_footer(flavour, channel, count=3, part=2, parts=3)


@pytest.mark.parametrize("flavour", list(Flavour))
def test_single_part_digest_has_no_part_and_no_footer(renderer: Renderer, flavour: Flavour) -> None:
    out = renderer.digest(flavour, make_channel(), EVENTS)
    assert "part" not in out
    assert len(out.split(renderer.separator(flavour))) == 4
    assert renderer.digest_footer(flavour, make_channel(), count=3, part=1, parts=1) == ""


def test_digest_header_wording(renderer: Renderer) -> None:
    def header(**kw: int | None) -> str:
        return renderer.digest_header(Flavour.TEXT, make_channel(), **kw)  # type: ignore[arg-type]

    assert header(count=1, part=1, parts=1) == "Digest: 1 event"
    assert header(count=12, part=1, parts=3) == "Digest: 12 events (part 1/3)"
    assert header(count=5, part=1, parts=3, total=12) == "Digest: 5 of 12 events (part 1/3)"
    assert header(count=5, part=1, parts=1, total=5) == "Digest: 5 events"


def test_digest_entries_link_their_titles(renderer: Renderer) -> None:
    entry = renderer.digest_entry(Flavour.SLACK_MRKDWN, make_channel(), EVENTS[0], index=1)
    assert entry == (
        "• 🟠 <https://status.example.com/incidents/42?tab=log&amp;x=(1)|Event number 1> · host1"
    )
    no_url = make_event(url=None, title="T")
    entry = renderer.digest_entry(Flavour.TELEGRAM_MARKDOWN_V2, make_channel(), no_url, index=1)
    assert entry == "• 🟠 *T* · db1"


def test_separators() -> None:
    renderer = default_renderer()
    assert renderer.separator(Flavour.DINGTALK_MARKDOWN) == "\n\n"
    assert renderer.separator(Flavour.TEAMS_MARKDOWN) == "\n\n"
    assert renderer.separator(Flavour.SLACK_MRKDWN) == "\n"
    assert renderer.separator(Flavour.HTML) == "\n"


def test_default_renderer_is_cached() -> None:
    assert default_renderer() is default_renderer()
    assert default_renderer().max_render_s == 0.5
    assert default_renderer().max_output_chars == 200_000
