"""The Renderer: message text for one event or a digest, per flavour, from the default
templates or a channel's overrides; and the check of overrides when a channel is saved.
Imports only jinja2, the standard library and tidings.core (and its siblings in render).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from jinja2 import Template, TemplateSyntaxError, nodes
from jinja2.exceptions import SecurityError

from tidings.core.errors import ValidationError
from tidings.core.model import Channel, Event
from tidings.render import flavours
from tidings.render.context import channel_context, event_context, sample_variables
from tidings.render.environment import SandboxEnvironment, render
from tidings.render.flavours import Flavour
from tidings.render.limits import Budget

TEMPLATE_NAMES = ("event", "digest_header", "digest_entry", "digest_footer")
MAX_TEMPLATE_CHARS = 20_000
OVERRIDE_CACHE_SIZE = 256
_REQUIRED = frozenset({"event", "digest_entry"})
# Dunder names and name-mangled privates (`_TemplateReference__context`): never data keys.
_PRIVATE = re.compile(r"__|_[A-Za-z0-9]+__")
# A str.format field reaching for a private attribute: "{0.__class__}", "{x[_y]}".
_PRIVATE_FIELD = re.compile(r"\{[^{}]*[.\[]_[^{}]*\}?")


#: Digest entries rendered while planning one digest: (flavour, channel id, event object id,
#: index) -> (the event, kept so its id stays its own, and the text).
_EntryMemo = dict[tuple[Flavour, int, int, int], tuple[Event, str]]
_entry_memo: ContextVar[_EntryMemo | None] = ContextVar("tidings_entry_memo", default=None)


@contextlib.contextmanager
def remembering_entries() -> Iterator[None]:
    """Within the block, a digest entry rendered at the same index is rendered once.

    Planning a digest renders the same leading entries at the same positions for every size
    it tries; an entry's text depends only on its event, its index and the channel, all
    fixed while one digest is planned, so the block must not span a channel change.
    """
    token = _entry_memo.set({})
    try:
        yield
    finally:
        _entry_memo.reset(token)


class RenderError(Exception):
    """A template failed at render time; the message says which template and why."""

    def __init__(
        self, message: str, *, template: str = "", flavour: str = "", reason: str = ""
    ) -> None:
        super().__init__(message)
        self.template = template  # "event", "digest_header", …
        self.flavour = flavour
        self.reason = reason


class Renderer:
    """Renders with one cached sandbox per flavour; safe to share between threads and tasks."""

    def __init__(self, *, max_render_s: float = 0.5, max_output_chars: int = 200_000) -> None:
        if max_render_s <= 0 or max_output_chars <= 0:
            raise ValueError("max_render_s and max_output_chars must be positive")
        self.max_render_s = max_render_s
        self.max_output_chars = max_output_chars
        self._environments: dict[Flavour, SandboxEnvironment] = {}
        self._compiled = functools.lru_cache(maxsize=OVERRIDE_CACHE_SIZE)(self._compile)

    # --- rendering ------------------------------------------------------------------------

    def event(self, flavour: Flavour, channel: Channel, event: Event) -> str:
        return self._render(flavour, channel, "event", {"event": event_context(event)})

    def digest_header(
        self,
        flavour: Flavour,
        channel: Channel,
        *,
        count: int,
        part: int,
        parts: int,
        total: int | None = None,
    ) -> str:
        variables = {"count": count, "part": part, "parts": parts, "total": total}
        return self._render(flavour, channel, "digest_header", variables)

    def digest_entry(self, flavour: Flavour, channel: Channel, event: Event, *, index: int) -> str:
        memo = _entry_memo.get()
        key = (flavour, channel.id, id(event), index)
        if memo is not None and key in memo:
            return memo[key][1]
        variables = {"event": event_context(event), "index": index}
        text = self._render(flavour, channel, "digest_entry", variables)
        if memo is not None:
            memo[key] = (event, text)
        return text

    def digest_footer(
        self, flavour: Flavour, channel: Channel, *, count: int, part: int, parts: int
    ) -> str:
        variables = {"count": count, "part": part, "parts": parts, "total": None}
        return self._render(flavour, channel, "digest_footer", variables)

    def digest(
        self,
        flavour: Flavour,
        channel: Channel,
        events: Sequence[Event],
        *,
        part: int = 1,
        parts: int = 1,
    ) -> str:
        """header + entries joined by the flavour's separator + footer (adapters segment by
        entries). Entries are numbered from 1; empty pieces (e.g. no footer) are left out."""
        count = len(events)
        pieces = [
            self.digest_header(flavour, channel, count=count, part=part, parts=parts),
            *(self.digest_entry(flavour, channel, e, index=i) for i, e in enumerate(events, 1)),
            self.digest_footer(flavour, channel, count=count, part=part, parts=parts),
        ]
        return self.separator(flavour).join(piece for piece in pieces if piece)

    def separator(self, flavour: Flavour) -> str:
        return flavours.SEPARATORS[Flavour(flavour)]

    def escape(self, flavour: Flavour, text: str) -> str:
        return flavours.escape(flavour, text)

    def _render(
        self, flavour: Flavour, channel: Channel, name: str, variables: dict[str, Any]
    ) -> str:
        flavour = Flavour(flavour)
        override = channel.templates.get(name) if isinstance(channel.templates, Mapping) else None
        source = override if isinstance(override, str) else None
        origin = "default" if source is None else "channel"
        template: Template | None = None
        try:
            template = self._template(flavour, name, source)
            context = {"channel": channel_context(channel), **variables}
            text = render(template, context, self._budget())
        except Exception as exc:
            reason = _describe(exc, template)
            message = f"{origin} template {name!r} ({flavour.value}) failed: {reason}"
            raise RenderError(message, template=name, flavour=flavour, reason=reason) from exc
        return text.rstrip("\n")

    def _template(self, flavour: Flavour, name: str, source: str | None) -> Template:
        if source is None:
            return self._environment(flavour).get_template(f"{name}.j2")
        return self._compiled(flavour, source)

    def _compile(self, flavour: Flavour, source: str) -> Template:
        return self._environment(flavour).from_string(source)

    def _environment(self, flavour: Flavour) -> SandboxEnvironment:
        environment = self._environments.get(flavour)
        if environment is None:
            environment = self._environments.setdefault(flavour, SandboxEnvironment(flavour))
        return environment

    def _budget(self) -> Budget:
        return Budget.start(self.max_render_s, self.max_output_chars)

    # --- validation -----------------------------------------------------------------------

    def validate_templates(self, templates: Mapping[str, object]) -> dict[str, str]:
        """Check a channel's overrides when saved: keys must be among TEMPLATE_NAMES, values
        strings ≤ 20,000 chars that compile in the sandbox; raise ValidationError(
        f"templates.{name}", reason) (compile errors rejected with the line number). Returns a
        normalised copy (line endings as "\\n").

        Beyond compiling, each template is scanned for dunder and private attribute names and
        tried on a sample event: what the sandbox refuses there is refused now. Other failures
        of the trial (say, arithmetic on a data key the sample lacks) are left to render time.
        """
        if not isinstance(templates, Mapping):
            raise ValidationError("templates", "must be an object of template name to text")
        checked: dict[str, str] = {}
        for name, value in templates.items():
            field = f"templates.{name}"
            if name not in TEMPLATE_NAMES:
                raise ValidationError(field, f"unknown template; use {', '.join(TEMPLATE_NAMES)}")
            if not isinstance(value, str):
                raise ValidationError(field, "must be a string")
            source = value.replace("\r\n", "\n")
            if len(source) > MAX_TEMPLATE_CHARS:
                raise ValidationError(field, f"must be at most {MAX_TEMPLATE_CHARS} characters")
            if name in _REQUIRED and not source.strip():
                raise ValidationError(field, "must not be empty")
            self._check_source(field, name, source)
            checked[name] = source
        return checked

    def _check_source(self, field: str, name: str, source: str) -> None:
        environment = self._environment(Flavour.TEXT)
        try:
            template = self._compiled(Flavour.TEXT, source)
            tree = environment.parse(source)
        except TemplateSyntaxError as exc:
            raise ValidationError(field, f"line {exc.lineno}: {exc.message}") from exc
        except Exception as exc:  # RecursionError, MemoryError: absurd nesting
            raise ValidationError(field, f"does not compile: {type(exc).__name__}") from exc
        private = _private_access(tree)
        if private is not None:
            lineno, attribute = private
            raise ValidationError(field, f"line {lineno}: access to {attribute!r} is not allowed")
        try:
            render(template, sample_variables(name), self._budget())
        except SecurityError as exc:
            reason = f"refused by the sandbox: {_describe(exc, template)}"
            raise ValidationError(field, reason) from exc
        except Exception:
            pass  # may depend on the event's data: render time will tell


def _private_access(tree: nodes.Template) -> tuple[int, str] | None:
    """The first `x.__y`, `x["__y"]`, `x|attr("__y")` or "{0.__y}" in `tree`, as (line, name)."""
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Const)):
        if isinstance(node, nodes.Const):
            found = _PRIVATE_FIELD.search(node.value) if isinstance(node.value, str) else None
            if found is not None:
                return node.lineno, found.group()
            continue
        if isinstance(node, nodes.Getattr):
            name: object = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            name = node.arg.value
        elif isinstance(node, nodes.Filter) and node.name == "attr" and node.args:
            name = node.args[0].value if isinstance(node.args[0], nodes.Const) else None
        else:
            continue
        if isinstance(name, str) and _PRIVATE.match(name):
            return node.lineno, name
    return None


def _describe(exc: BaseException, template: Template | None) -> str:
    """`exc` as "line N: Type: message", the line being the template's (when known)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TemplateSyntaxError):
        return f"line {exc.lineno}: {exc.message}"
    filename = (template.filename or "<template>") if template is not None else None
    lineno, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    return text if lineno is None else f"line {lineno}: {text}"


@functools.cache
def default_renderer() -> Renderer:
    """The process-wide Renderer with the default limits."""
    return Renderer()
