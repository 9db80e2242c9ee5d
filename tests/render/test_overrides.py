"""Per-channel overrides: used, escaped the same way, compiled once, validated when saved."""

from __future__ import annotations

import pytest

from tests.render.samples import make_channel, make_event
from tidings.core.errors import ValidationError
from tidings.core.model import Severity
from tidings.render import TEMPLATE_NAMES, Flavour, Renderer, RenderError
from tidings.render.environment import SandboxEnvironment


@pytest.fixture
def renderer() -> Renderer:
    return Renderer()


def render_event(
    renderer: Renderer, source: str, flavour: Flavour = Flavour.TEXT, **event: object
) -> str:
    return renderer.event(flavour, make_channel({"event": source}), make_event(**event))


def test_override_replaces_only_its_template(renderer: Renderer) -> None:
    channel = make_channel({"digest_entry": "{{ index }}) {{ event.title }}"})
    event = make_event(title="T")
    assert renderer.digest_entry(Flavour.TEXT, channel, event, index=3) == "3) T"
    assert renderer.event(Flavour.TEXT, channel, event).startswith("T\n🟠 HIGH")


def test_literal_text_is_markup_and_expressions_are_escaped(renderer: Renderer) -> None:
    out = render_event(
        renderer, "*{{ event.title }}* ({{ '*x*' }})", Flavour.TELEGRAM_MARKDOWN_V2, title="a.b"
    )
    assert out == "*a\\.b* (\\*x\\*)"


def test_raw_is_the_one_way_to_print_markup(renderer: Renderer) -> None:
    source = "{{ '*b*'|raw }} {{ event.title|raw|truncate_chars(3) }} {{ ('*' ~ event.title)|raw }}"
    out = render_event(renderer, source, Flavour.TELEGRAM_MARKDOWN_V2, title="a_bc")
    assert out == "*b* a_… *a_bc"
    # Anything built from a raw value is plain text again.
    out = render_event(
        renderer, "{{ '*b*'|raw ~ event.title }}", Flavour.TELEGRAM_MARKDOWN_V2, title="x"
    )
    assert out == "\\*b\\*x"


def test_context_variables(renderer: Renderer) -> None:
    source = (
        "{{ event.id }}|{{ event.kind }}|{{ event.severity }}|{{ event.created_at }}|"
        "{{ event.labels.env }}|{{ event.data.host }}|{{ event.data.nested.a[1] }}|"
        "{{ event.tenant }}|{{ channel.id }}:{{ channel.name }}:{{ channel.kind }}"
    )
    assert render_event(renderer, source) == (
        "42|db.disk_full|high|2024-05-01T12:00:00Z|prod|db1|2||7:ops:inbox"
    )


def test_digest_variables(renderer: Renderer) -> None:
    channel = make_channel(
        {
            "digest_header": "{{ count }} {{ part }}/{{ parts }} {{ total }}",
            "digest_footer": "end {{ count }} {{ part }}/{{ parts }}",
        }
    )
    assert renderer.digest_header(Flavour.TEXT, channel, count=2, part=1, parts=2, total=9) == (
        "2 1/2 9"
    )
    assert renderer.digest_footer(Flavour.TEXT, channel, count=2, part=1, parts=2) == "end 2 1/2"


def test_a_missing_data_key_renders_empty(renderer: Renderer) -> None:
    source = "[{{ event.data.missing }}][{{ event.data.missing.deeper.still }}][{{ nothing }}]"
    assert render_event(renderer, source) == "[][][]"
    assert render_event(renderer, "{{ event.data.missing|default('n/a') }}") == "n/a"
    assert render_event(renderer, "{{ event.url }}", url=None) == ""


def test_helper_filters(renderer: Renderer) -> None:
    out = render_event(
        renderer,
        "{{ event.body|truncate_chars(5) }}|{{ event.title|upper }}",
        body="abcdefgh",
        title="t",
    )
    assert out == "abcd…|T"
    emoji = {
        Severity.INFO: "ℹ️",
        Severity.LOW: "🔵",
        Severity.MEDIUM: "🟡",
        Severity.HIGH: "🟠",
        Severity.CRITICAL: "🔴",
    }
    for severity, expected in emoji.items():
        assert (
            render_event(renderer, "{{ event.severity|severity_emoji }}", severity=severity)
            == expected
        )


def test_loops_keep_their_loop_variable(renderer: Renderer) -> None:
    source = (
        "{% for k, v in event.labels|dictsort %}"
        "{{ loop.index }}/{{ loop.length }}{{ k }}{% if loop.last %}.{% endif %} "
        "{% endfor %}"
    )
    assert render_event(renderer, source) == "1/2env 2/2team. "


def test_overrides_compile_once_per_flavour_and_source(renderer: Renderer) -> None:
    channel = make_channel({"event": "{{ event.title }}!"})
    for _ in range(3):
        renderer.event(Flavour.TEXT, channel, make_event())
    renderer.event(Flavour.HTML, channel, make_event())
    info = renderer._compiled.cache_info()
    assert (info.misses, info.hits) == (2, 2)


def test_environments_are_cached_per_flavour(renderer: Renderer) -> None:
    assert renderer._environment(Flavour.HTML) is renderer._environment(Flavour.HTML)
    assert renderer._environment(Flavour.HTML) is not renderer._environment(Flavour.TEXT)
    assert isinstance(renderer._environment(Flavour.TEXT), SandboxEnvironment)


def test_an_override_may_include_the_default(renderer: Renderer) -> None:
    out = render_event(renderer, "prefix\n{% include 'event.j2' %}", title="T")
    assert out.startswith("prefix\nT\n🟠 HIGH")


# --- failures at render time ------------------------------------------------------------------


def test_a_stored_broken_override_fails_with_render_error(renderer: Renderer) -> None:
    with pytest.raises(
        RenderError, match=r"channel template 'event' \(text\) failed: line 2:"
    ) as info:
        render_event(renderer, "ok\n{% if %}")
    assert info.value.template == "event"
    assert info.value.flavour == Flavour.TEXT


def test_a_runtime_error_names_template_and_line(renderer: Renderer) -> None:
    with pytest.raises(RenderError, match=r"'digest_footer'.*line 2: ZeroDivisionError") as info:
        renderer.digest_footer(
            Flavour.HTML,
            make_channel({"digest_footer": "a\n{{ 1 / 0 }}"}),
            count=1,
            part=1,
            parts=1,
        )
    assert isinstance(info.value.__cause__, ZeroDivisionError)


# --- validation when saved --------------------------------------------------------------------


def test_validate_returns_a_normalised_copy(renderer: Renderer) -> None:
    given = {"event": "{{ event.title }}\r\nline 2", "digest_footer": ""}
    checked = renderer.validate_templates(given)
    assert checked == {"event": "{{ event.title }}\nline 2", "digest_footer": ""}
    assert checked is not given
    assert renderer.validate_templates({}) == {}
    all_names = dict.fromkeys(TEMPLATE_NAMES, "x")
    assert renderer.validate_templates(all_names) == all_names


def test_syntax_error_names_template_and_line(renderer: Renderer) -> None:
    with pytest.raises(ValidationError) as info:
        renderer.validate_templates({"digest_entry": "ok\nstill ok\n{% for x in %}"})
    assert info.value.field == "templates.digest_entry"
    assert "line 3" in info.value.message


def test_unknown_filter_is_a_compile_error(renderer: Renderer) -> None:
    with pytest.raises(ValidationError, match=r"templates\.event: line 1: .*no_such"):
        renderer.validate_templates({"event": "{{ event.title|no_such }}"})
    # Jinja's HTML helpers are gone: escaping is automatic and |raw is the way to markup.
    with pytest.raises(ValidationError, match="safe"):
        renderer.validate_templates({"event": "{{ event.title|safe }}"})


@pytest.mark.parametrize(
    ("templates", "field", "reason"),
    [
        ({"subject": "x"}, "templates.subject", "unknown template"),
        ({"event": 3}, "templates.event", "must be a string"),
        ({"event": None}, "templates.event", "must be a string"),
        ({"event": "x" * 20_001}, "templates.event", "at most 20000"),
        ({"event": "  \n"}, "templates.event", "must not be empty"),
        ({"digest_entry": ""}, "templates.digest_entry", "must not be empty"),
    ],
)
def test_invalid_overrides(
    renderer: Renderer, templates: dict[str, object], field: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as info:
        renderer.validate_templates(templates)
    assert info.value.field == field
    assert reason in info.value.message


def test_templates_must_be_a_mapping(renderer: Renderer) -> None:
    with pytest.raises(ValidationError) as info:
        renderer.validate_templates(["event"])  # type: ignore[arg-type]
    assert info.value.field == "templates"


def test_a_template_at_the_size_limit_is_accepted(renderer: Renderer) -> None:
    assert renderer.validate_templates({"event": "x" * 20_000})["event"] == "x" * 20_000


def test_data_dependent_failures_are_left_to_render_time(renderer: Renderer) -> None:
    source = "{{ event.data.used / event.data.total }}"
    assert renderer.validate_templates({"event": source}) == {"event": source}
    with pytest.raises(RenderError):
        render_event(renderer, source)
