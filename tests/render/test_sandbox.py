"""The sandbox: escapes refused, caps on time, size, ranges and depth, nothing leaked, no hang.

Each payload is refused twice: as a ValidationError when a channel is saved with it, and as a
RenderError (caused by a SecurityError) if it was stored anyway — each well under a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from jinja2.exceptions import SecurityError

from tests.render.samples import make_channel, make_event
from tidings.core.errors import ValidationError
from tidings.render import Flavour, Renderer, RenderError
from tidings.render.environment import SandboxEnvironment
from tidings.render.limits import LimitExceeded

ESCAPES = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    '{{ "{0.__class__}".format(event) }}',
    '{{ event|attr("__class__") }}',
    "{{ lipsum.__globals__ }}",
    "{% for x in range(100000000) %}{% endfor %}",
    '{{ "x" * 10000000 }}',
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
]

# Ways to build a huge value or spin without an obvious loop: each refused before it costs.
AMPLIFIERS = [
    '{{ "x"|center(1000000000) }}',
    '{{ "x".ljust(1000000000) }}',
    '{{ "a\tb".expandtabs(tabsize=1000000000) }}',
    '{{ ("x" * 1000).replace("x", "y" * 1000) }}',
    '{{ ("x" * 1000)|replace("x", "y" * 1000) }}',
    "{{ 2 ** 1000000000 }}",
    "{{ (10 ** 20000) * (10 ** 20000) }}",
    '{{ "{:>999999999}".format(1) }}',
    '{{ "{:{}}".format(1, 999999999) }}',
    '{{ "%999999999d" % 1 }}',
    '{{ "%*d"|format(999999999, 1) }}',
    '{% set a = "x" * 100000 %}{% set b = a ~ a %}{% set c = b ~ b %}{{ c }}',
    '{% set a = "x" * 100000 %}{{ a + a + a }}',
    '{% set a = "x" * 1000 %}{{ ([a] * 1000)|join }}',
    '{% set a = "x" * 1000 %}{{ range(1000)|map("string")|map("replace", "", a)|join }}',
    '{% set a = "x" * 1000 %}{{ "".join(range(1000)|map("string")|map("replace", "", a)) }}',
    '{{ dict.fromkeys(range(10000), "x" * 1000) }}',
    '{% set ns = namespace(s="x") %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}'
    "{% endfor %}",
    "{% set a %}{% for i in range(5000) %}{{ 'x' * 100 }}{% endfor %}{% endset %}"
    "{% set b %}{{ a }}{{ a }}{% endset %}{% set c %}{{ b }}{{ b }}{% endset %}{{ c }}",
    "{% set a %}{% for i in range(10000) %}" + "y" * 15_000 + "{% endfor %}{% endset %}{{ a }}",
    "{% filter center(1000000000) %}x{% endfilter %}",
    '{{ "x"|indent(1000000000) }}',
    '{{ "ab"|wordwrap(1, wrapstring="x" * 100000) }}',
    "{{ [1]|batch(1000000000, 0)|list }}",
    "{{ [1]|slice(1000000000)|list }}",
    "{{ {'a': 1}|tojson(indent=1000000000) }}",
    '{{ (1).to_bytes(1000000000, "big") }}',
    '{{ "ab".translate({97: "x" * 100000}) }}',
    "{% macro d(s, n) %}{{ d(s ~ s, n - 1) if n else s }}{% endmacro %}{{ d('x', 40) }}",
]


@contextmanager
def quickly(limit_s: float = 1.0) -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < limit_s


def assert_no_leak(message: str) -> None:
    for leak in (
        "<class",
        "object at 0x",
        "<function",
        "<built-in",
        "mappingproxy",
        "__builtins__",
    ):
        assert leak not in message


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer()


@pytest.mark.parametrize("source", ESCAPES)
@pytest.mark.parametrize("flavour", [Flavour.TEXT, Flavour.HTML])
def test_escape_is_a_render_error(renderer: Renderer, source: str, flavour: Flavour) -> None:
    with quickly(), pytest.raises(RenderError) as info:
        renderer.event(flavour, make_channel({"event": source}), make_event())
    assert isinstance(info.value.__cause__, SecurityError)
    assert_no_leak(str(info.value))


@pytest.mark.parametrize("source", ESCAPES)
def test_escape_is_refused_when_saved(renderer: Renderer, source: str) -> None:
    with quickly(), pytest.raises(ValidationError) as info:
        renderer.validate_templates({"event": source})
    assert info.value.field == "templates.event"
    assert_no_leak(info.value.message)


@pytest.mark.parametrize("source", AMPLIFIERS)
def test_amplifier_is_refused(renderer: Renderer, source: str) -> None:
    with quickly(0.5), pytest.raises(RenderError) as info:
        renderer.event(Flavour.TEXT, make_channel({"event": source}), make_event())
    assert isinstance(info.value.__cause__, SecurityError)
    with quickly(0.5), pytest.raises(ValidationError):
        renderer.validate_templates({"event": source})


def test_a_hidden_escape_is_still_caught_when_saved(renderer: Renderer) -> None:
    for source in (
        "{% if false %}{{ x.__class__ }}{% endif %}",
        "{% if false %}{{ x['__globals__'] }}{% endif %}",
        "{% if false %}{{ x|attr('__class__') }}{% endif %}",
        "{% if false %}{{ '{0._x}'.format(x) }}{% endif %}",
    ):
        with pytest.raises(ValidationError, match="line 1: access to"):
            renderer.validate_templates({"event": source})


def test_data_keys_with_one_underscore_are_fine(renderer: Renderer) -> None:
    source = "{{ event.data._private }}"
    assert renderer.validate_templates({"event": source}) == {"event": source}
    event = make_event(data={"_private": "ok"})
    assert renderer.event(Flavour.TEXT, make_channel({"event": source}), event) == "ok"


# --- caps -------------------------------------------------------------------------------------


def test_output_cap() -> None:
    small = Renderer(max_output_chars=1000)
    channel = make_channel({"event": "{% for i in range(100) %}{{ 'x' * 50 }}{% endfor %}"})
    with pytest.raises(RenderError, match="output is larger than 1000") as info:
        small.event(Flavour.TEXT, channel, make_event())
    assert isinstance(info.value.__cause__, LimitExceeded)
    fits = make_channel({"event": "{% for i in range(10) %}{{ 'x' * 50 }}{% endfor %}"})
    assert small.event(Flavour.TEXT, fits, make_event()) == "x" * 500


def test_output_cap_counts_escaped_text() -> None:
    small = Renderer(max_output_chars=1000)
    event = make_event(title="<" * 300)
    with pytest.raises(RenderError, match="output is larger"):
        small.event(Flavour.HTML, make_channel(), event)


def test_time_cap_stops_a_loop_with_no_output() -> None:
    hasty = Renderer(max_render_s=0.05)
    source = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}"
    with quickly(0.5), pytest.raises(RenderError, match="time limit"):
        hasty.event(Flavour.TEXT, make_channel({"event": source}), make_event())


def test_range_cap(renderer: Renderer) -> None:
    assert SandboxEnvironment.MAX_RANGE == 10_000
    ok = make_channel({"event": "{{ range(10000)|length }}"})
    assert renderer.event(Flavour.TEXT, ok, make_event()) == "10000"
    too_many = make_channel({"event": "{{ range(10001)|length }}"})
    with pytest.raises(RenderError, match="at most 10000"):
        renderer.event(Flavour.TEXT, too_many, make_event())


def test_lipsum_is_clamped(renderer: Renderer) -> None:
    channel = make_channel({"event": "{{ lipsum(1000000, max=1000000) }}"})
    out = renderer.event(Flavour.TEXT, channel, make_event())
    assert out.count("\n\n") <= 9
    assert len(out) < 20_000


def test_call_depth_cap_allows_modest_recursion(renderer: Renderer) -> None:
    source = "{% macro f(n) %}{{ n }}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"
    assert renderer.event(Flavour.TEXT, make_channel({"event": source}), make_event()) == "543210"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{ "-" * 20 }}', "-" * 20),
        ('{{ "{:>5}|{:.2f}".format("ab", 3.14159) }}', "   ab|3.14"),
        ('{{ "%05d" % 42 }}', "00042"),
        ('{{ "%s=%s"|format("a", 1) }}', "a=1"),
        ("{{ 2 ** 10 }}", "1024"),
        ('{{ "a,b".split(",")|join("+") }}', "a+b"),
        ('{{ "ab".upper() ~ "x".center(5) ~ "|" }}', "AB  x  |"),
        ("{{ [1, 2, 3]|sum }}", "6"),
        ("{{ ([1] + [2]) * 2 }}", "[1, 2, 1, 2]"),
        (
            "{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}"
            "{% endfor %}{{ ns.n }}",
            "10",
        ),
        ("{{ (lipsum(2, min=2, max=3)|wordcount) > 0 }}", "True"),
        ("{{ event.data|tojson }}", '{"host": "db1", "nested": {"a": [1, 2]}, "used": 95}'),
    ],
)
def test_ordinary_templates_still_work(renderer: Renderer, source: str, expected: str) -> None:
    assert renderer.event(Flavour.TEXT, make_channel({"event": source}), make_event()) == expected
    assert renderer.validate_templates({"event": source}) == {"event": source}
