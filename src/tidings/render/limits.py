"""What one render may cost: a deadline, the size of any value a template builds, the text its
`{{ }}` produce in all, and how deep its calls nest. Imports only jinja2 and the standard library.
"""

from __future__ import annotations

import math
import re
import time
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

T = TypeVar("T")

DEFAULT_MAX_CHARS = 200_000
#: `{{ }}` output counted inside macros and block sets too, so a template may produce this
#: many times its output cap in all (nested macros print the same text more than once).
WORK_FACTOR = 8
MAX_CALL_DEPTH = 32
#: The largest integer an operator may produce (about 30,000 decimal digits).
MAX_INT_BITS = 100_000
MAX_JSON_INDENT = 16


class LimitExceeded(SecurityError):
    """A render went over a cap (time, size, depth, range): refused like any sandbox breach."""


@dataclass(slots=True)
class Budget:
    """The caps of one render, and what it has used.

    The budget of the render in progress lives in a ContextVar (`current`), so the sandbox
    hooks (operators, calls, filters, loops, `~`) charge it without threading it through
    Jinja. Sizes are checked *before* an operation wherever its result could dwarf its inputs
    (`"x" * 10**7`, `s.center(10**9)`, `2 ** 10**9`), and after it everywhere else, so no
    value grows past `max_chars` by more than one step.
    """

    deadline: float  # on the time.monotonic() clock; math.inf outside a render
    max_chars: int
    max_work_chars: int
    max_depth: int = MAX_CALL_DEPTH
    depth: int = 0
    work: int = 0

    @classmethod
    def start(cls, max_render_s: float, max_chars: int) -> Budget:
        return cls(time.monotonic() + max_render_s, max_chars, WORK_FACTOR * max_chars)

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise LimitExceeded("rendering took longer than its time limit")

    def charge(self, chars: int) -> None:
        self.work += chars
        if self.work > self.max_work_chars:
            raise LimitExceeded(f"the template produced more than {self.max_work_chars} characters")

    def check_size(self, value: T, what: str) -> T:
        if weight(value, self.max_chars) > self.max_chars:
            raise LimitExceeded(f"{what} is larger than {self.max_chars} characters")
        return value

    @contextmanager
    def nested(self) -> Iterator[None]:
        if self.depth >= self.max_depth:
            raise LimitExceeded(f"calls nest deeper than {self.max_depth} levels")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


_ACTIVE: ContextVar[Budget | None] = ContextVar("tidings_render_budget", default=None)


def current() -> Budget:
    """The budget of the render in progress; outside one (compile-time constant folding), a
    budget with the default size caps and no deadline."""
    return _ACTIVE.get() or Budget(math.inf, DEFAULT_MAX_CHARS, WORK_FACTOR * DEFAULT_MAX_CHARS)


@contextmanager
def active(budget: Budget) -> Iterator[Budget]:
    token = _ACTIVE.set(budget)
    try:
        yield budget
    finally:
        _ACTIVE.reset(token)


def weight(value: object, limit: int) -> int:
    """About how many characters `str(value)` takes, counted only until it passes `limit`.

    Containers are walked (10,000 references to one long string are heavy); other objects
    count 8. Never consumes an iterator.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Namespace):
            item = dict(object.__getattribute__(item, "_Namespace__attrs"))
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, list | tuple | set | frozenset | dict):
            total += 2 * len(item) + 2
            if total > limit:
                return total
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                stack.extend(item)
        else:
            total += 8
        if total > limit:
            return total
    return total


def _at_most(what: str, value: object, limit: int) -> None:
    if isinstance(value, int) and value > limit:
        raise LimitExceeded(f"{what} {value} is larger than {limit}")


def check_binop(operator: str, left: object, right: object, limit: int) -> None:
    """Refuse `*`, `**` and `%` whose result would be too large, before computing it."""
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(times, int) and isinstance(seq, str | bytes | list | tuple):
                _at_most("a repeated value's size", weight(seq, limit) * times, limit)
        if isinstance(left, int) and isinstance(right, int):
            _at_most("a product's bit length", left.bit_length() + right.bit_length(), MAX_INT_BITS)
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            _at_most("a power's bit length", left.bit_length() * right, MAX_INT_BITS)
    elif operator == "%" and isinstance(left, str):
        check_percent_format(left)


# Widths or precisions taken from the arguments (`*`) or of six digits and more.
_WIDE_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d{6,}|\d*\.(?:\*|\d{6,}))")
_WIDE_BRACES = re.compile(r"\{[^{}]*(?:\{|:[^{}]*\d{6,})")


def check_percent_format(fmt: str) -> None:
    if _WIDE_PERCENT.search(fmt):
        raise LimitExceeded("%-format widths from arguments or of 100000 and more are refused")


def check_brace_format(fmt: str) -> None:
    if _WIDE_BRACES.search(fmt):
        raise LimitExceeded("format fields nested or 100000 and more wide are refused")


_TEXT_METHOD_NAMES = (
    "capitalize casefold count decode encode endswith find hex index isalnum isalpha isascii "
    "isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper "
    "lower lstrip partition removeprefix removesuffix rfind rindex rpartition rsplit rstrip "
    "split splitlines startswith strip swapcase title upper"
)
_TEXT_METHODS = frozenset(_TEXT_METHOD_NAMES.split())
_NUMBER_METHODS = frozenset(
    {"as_integer_ratio", "bit_count", "bit_length", "conjugate", "hex", "is_integer"}
)


def check_method(
    obj: object, args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int
) -> tuple[Any, ...]:
    """Check a call of a method of a str, bytes or number; the args to call it with.

    An allow-list: the methods whose result is about the size of the object, plus the
    padding, `replace`, `expandtabs` and `join` under a size check. `join` gets its items as
    a list (an iterator is consumed here, to be measured).
    """
    if not isinstance(obj, types.BuiltinMethodType):
        return args
    owner, name = obj.__self__, obj.__name__
    if isinstance(owner, int | float) and name not in _NUMBER_METHODS:
        raise SecurityError(f"{type(owner).__name__}.{name}() is not available in templates")
    if not isinstance(owner, str | bytes) or name in _TEXT_METHODS:
        return args
    if name in ("center", "ljust", "rjust", "zfill") and args:
        _at_most(f"the width of {name}()", args[0], limit)
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tabsize, int):
            _at_most("expandtabs()'s result", len(owner) * tabsize, limit)
    elif name == "replace" and len(args) >= 2:
        _at_most("replace()'s result", replaced_size(owner, *args[:3]), limit)
    elif name == "join" and args:
        items = list(args[0])
        _at_most("join()'s result", weight(items, limit) + len(owner) * len(items), limit)
        return (items,)
    elif name not in ("center", "ljust", "rjust", "zfill"):
        raise SecurityError(f"{type(owner).__name__}.{name}() is not available in templates")
    return args


def replaced_size(text: object, old: object, new: object, count: object = -1) -> int:
    """The length `text.replace(old, new, count)` would have."""
    s, o, n = str(text), str(old), str(new)
    hits = s.count(o) if o else len(s) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * max(0, len(n) - len(o))


FilterCheck = Callable[[tuple[Any, ...], Mapping[str, Any], int], None]


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], at: int, name: str, default: Any) -> Any:
    """A filter argument as a template passes it: `args[0]` is the filtered value."""
    return args[at] if len(args) > at else kwargs.get(name, default)


def _check_indent(args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int) -> None:
    width = _arg(args, kwargs, 1, "width", 4)
    step = len(width) if isinstance(width, str) else width
    text = str(args[0])
    if isinstance(step, int):
        _at_most("indent's result", len(text) + (text.count("\n") + 1) * step, limit)


def _check_wordwrap(args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int) -> None:
    text, width = str(args[0]), _arg(args, kwargs, 1, "width", 79)
    wrap = str(_arg(args, kwargs, 3, "wrapstring", None) or "\n")
    if isinstance(width, int):
        breaks = len(text) // max(width, 1) + text.count("\n") + 1
        _at_most("wordwrap's result", len(text) + breaks * len(wrap), limit)


def _check_replace(args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int) -> None:
    old, new = _arg(args, kwargs, 1, "old", ""), _arg(args, kwargs, 2, "new", "")
    size = replaced_size(args[0], old, new, _arg(args, kwargs, 3, "count", None))
    _at_most("replace's result", size, limit)


def _check_count(position: int, name: str, what: str) -> FilterCheck:
    def check(args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int) -> None:
        _at_most(what, _arg(args, kwargs, position, name, 0), limit)

    return check


#: Filters whose result can dwarf their input, checked on their arguments first (as a
#: template passes them: the filtered value, then the filter's own arguments).
FILTER_CHECKS: Mapping[str, FilterCheck] = {
    "center": _check_count(1, "width", "center's width"),
    "indent": _check_indent,
    "wordwrap": _check_wordwrap,
    "replace": _check_replace,
    "batch": _check_count(1, "linecount", "batch's size"),
    "slice": _check_count(1, "slices", "slice's count"),
    "format": lambda args, kwargs, limit: check_percent_format(str(args[0])),
    "tojson": lambda args, kwargs, limit: _at_most(
        "tojson's indent", _arg(args, kwargs, 1, "indent", None), MAX_JSON_INDENT
    ),
}
