"""The sandbox templates run in: one Jinja2 environment per flavour, whose `finalize` escapes
every `{{ expression }}` for that flavour unless it is `|raw`, under the caps of `limits`.
Imports only jinja2, the standard library and tidings.core (and its siblings in render).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NoReturn

from jinja2 import (
    ChainableUndefined,
    PackageLoader,
    Template,
    Undefined,
    nodes,
    pass_context,
    pass_environment,
)
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.filters import make_attrgetter
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum

from tidings.core.text import truncate_chars
from tidings.render import limits
from tidings.render.flavours import ESCAPES, Flavour, escape_url
from tidings.render.limits import LimitExceeded, current

LOOP_GUARD = "_tidings_loop_guard"
#: HTML helpers whose output `finalize` would escape anyway; `|raw` is the one way to markup.
REMOVED_FILTERS = frozenset({"safe", "e", "escape", "forceescape", "urlize", "xmlattr"})
SEVERITY_EMOJI: Mapping[str, str] = {
    "info": "ℹ️",
    "low": "🔵",
    "medium": "🟡",
    "high": "🟠",
    "critical": "🔴",
}


class Raw(str):
    """Markup a template author composed on purpose (`|raw`): printed without escaping."""

    __slots__ = ()


class _CodeGenerator(CodeGenerator):
    """Routes each `~` result and each `for` iterable through the budget: no sandbox hook
    sees them otherwise, and they are how a template could grow a value or spin in a loop."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_concat(")
        super().visit_Concat(node, frame)
        self.write(")")

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        # Before anything is generated: the generator collects the filters a template uses
        # from the tree, so the guard must be in the tree by then. Each pass of a loop is
        # charged the literal text in its body, which no other hook sees being produced.
        for loop in node.find_all(nodes.For):
            literal = sum(len(data.data) for data in loop.find_all(nodes.TemplateData))
            args: list[nodes.Expr] = [nodes.Const(literal)]
            loop.iter = nodes.Filter(loop.iter, LOOP_GUARD, args, [], None, None)
        super().visit_Template(node, frame)


class SandboxEnvironment(ImmutableSandboxedEnvironment):
    """An immutable sandbox for one flavour, with the default templates of that flavour.

    Undefined names and keys print as "" (`ChainableUndefined`, so `event.data.missing.deeper`
    too): an event without a data key a template mentions still renders; arithmetic on one
    fails. Attribute access the sandbox refuses raises `SecurityError` at once, rather than
    giving an undefined value that would print as "".
    """

    #: Jinja's own sandbox allows 100,000; a notification needs far fewer.
    MAX_RANGE = 10_000
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _CodeGenerator

    def __init__(self, flavour: Flavour) -> None:
        self.flavour = Flavour(flavour)
        self._escape = ESCAPES[self.flavour]
        super().__init__(
            loader=PackageLoader("tidings.render", f"templates/{self.flavour.value}"),
            autoescape=False,
            undefined=ChainableUndefined,
            finalize=self._finalize,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,
        )
        self.globals.update(range=self._range, lipsum=_lipsum)
        self.filters = _filters(self.filters, self.flavour)

    def _finalize(self, value: object) -> str:
        budget = current()
        if isinstance(value, Raw):
            text: str = value
        elif value is None or isinstance(value, Undefined):
            return ""
        else:
            text = self._escape(str(budget.check_size(value, "a printed value")))
        budget.charge(len(text))
        return text

    def _range(self, *args: int) -> range:
        values = range(*args)
        try:
            size = len(values)
        except OverflowError:
            size = self.MAX_RANGE + 1
        if size > self.MAX_RANGE:
            raise LimitExceeded(f"range() of {size} items; at most {self.MAX_RANGE}")
        return values

    def unsafe_undefined(self, obj: Any, attribute: str) -> NoReturn:
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = current()
        limits.check_binop(operator, left, right, budget.max_chars)
        return budget.check_size(self.binop_table[operator](left, right), f"a {operator} result")

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        args = limits.check_method(obj, args, kwargs, budget.max_chars)
        with budget.nested():
            result = super().call(context, obj, *args, **kwargs)
        return budget.check_size(result, "a call's result")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        formatter = super().wrap_str_format(value)
        if formatter is None:
            return None
        template = str(value.__self__)

        def checked(*args: Any, **kwargs: Any) -> str:
            limits.check_brace_format(template)
            return current().check_size(formatter(*args, **kwargs), "a format() result")

        return checked

    def checked_concat(self, value: str) -> str:
        return current().check_size(value, "a ~ result")


# --- globals and filters --------------------------------------------------------------------


def _lipsum(n: int = 5, html: bool = False, min: int = 20, max: int = 100) -> str:
    """Jinja's `lipsum`, at most 10 paragraphs of at most 100 words."""
    return generate_lorem_ipsum(builtins.min(n, 10), html, min, builtins.min(max, 100))


@pass_context  # never folded into a constant at compile time
def _loop_guard(context: Context, iterable: Iterable[Any], literal_chars: int = 0) -> Iterator[Any]:
    budget = current()
    for item in iterable:
        budget.tick()
        budget.charge(literal_chars)
        yield item


def _text(value: object) -> str:
    return "" if value is None or isinstance(value, Undefined) else str(value)


def _raw(value: object) -> Raw:
    return Raw(_text(value))


def _truncate_chars(value: object, length: int) -> str:
    text = truncate_chars(_text(value), length)
    return Raw(text) if isinstance(value, Raw) else text


def _severity_emoji(value: object) -> str:
    return SEVERITY_EMOJI.get(_text(value).lower(), "")


@pass_environment
def _join(environment: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    """Jinja's `join`, measuring as it goes (the items may be many references to one value)."""
    if attribute is not None:
        value = map(make_attrgetter(environment, attribute), value)
    budget, parts, size = current(), [], 0
    for item in value:
        parts.append(_text(item))
        size += len(parts[-1]) + len(str(d))
        if size > budget.max_chars:
            raise LimitExceeded(f"join's result is larger than {budget.max_chars} characters")
    return str(d).join(parts)


@pass_environment
def _sum(environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    """Jinja's `sum`, checking time and size at each step."""
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    budget, total = current(), start
    for item in iterable:
        budget.tick()
        total = budget.check_size(total + item, "sum's result")
    return total


def _guarded(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` under the budget: its input and result sized, its arguments checked if needed."""
    check = limits.FILTER_CHECKS.get(name)
    # A filter marked pass_context/pass_environment/pass_eval_context gets that first.
    first = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        if len(args) > first:
            budget.check_size(args[first], f"the input of |{name}")
            if check is not None:
                check(args[first:], kwargs, budget.max_chars)
        return budget.check_size(func(*args, **kwargs), f"the result of |{name}")

    return guarded


def _filters(builtin: Mapping[str, Callable[..., Any]], flavour: Flavour) -> dict[str, Any]:
    def href(value: object) -> Raw:
        return Raw(escape_url(flavour, _text(value)))

    table = {name: f for name, f in builtin.items() if name not in REMOVED_FILTERS}
    table.update(
        join=_join,
        sum=_sum,
        raw=_raw,
        href=href,
        truncate_chars=_truncate_chars,
        severity_emoji=_severity_emoji,
    )
    guarded: dict[str, Any] = {name: _guarded(name, f) for name, f in table.items()}
    guarded[LOOP_GUARD] = _loop_guard
    return guarded


def render(template: Template, context: Mapping[str, Any], budget: limits.Budget) -> str:
    """`template` rendered chunk by chunk, refused once its output or time goes over `budget`."""
    parts: list[str] = []
    size = 0
    with limits.active(budget):
        chunks = template.generate(context)
        try:
            for chunk in chunks:
                size += len(chunk)
                if size > budget.max_chars:
                    raise LimitExceeded(f"the output is larger than {budget.max_chars} characters")
                budget.tick()
                parts.append(chunk)
        finally:
            close = getattr(chunks, "close", None)  # a generator: release its frames now
            if close is not None:
                close()
    return "".join(parts)
