"""Telegram MarkdownV2 as a reader sees it: the visible text's length in UTF-16 code units, and
cutting a message to a limit without breaking an entity (every one open at the cut is closed
again, so Telegram can still parse it). Imports tidings.core and tidings.render.

Text whose structure cannot be followed (an unterminated code span or link) is measured whole
and shortened as plain, escaped text: both are upper bounds, never an undercount.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tidings.core.text import MARKER
from tidings.render.flavours import escape_telegram


def visible_units(text: str) -> int:
    """What Telegram's 4096 limit counts: the text after entities parsing, in UTF-16 units."""
    try:
        return sum(utf16(token.visible) for token in tokenize(text))
    except MalformedMarkdown:
        return utf16(text)


class MalformedMarkdown(ValueError):
    """Text whose MarkdownV2 structure cannot be followed (an unterminated code or link)."""


@dataclass(frozen=True, slots=True)
class Token:
    source: str  # as written
    visible: str  # what the reader sees of it
    kind: str  # "text", "toggle", "open" (a link), "close" (`](url)`), "atom" (code)
    closer: str = ""  # for "toggle" and "open": what ends the entity


_PLAIN_RUN = re.compile(r"[^\\`*_~|\[\]!>\n]+")
_TOGGLES = ("||", "__", "*", "_", "~")


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def tokenize(text: str) -> list[Token]:
    """Split MarkdownV2 into tokens; a link's opening token carries its `](url)` closer."""
    tokens: list[Token] = []
    links: list[int] = []
    i, line_start = 0, True
    while i < len(text):
        token = _next_token(text, i, line_start)
        if token.kind == "open":
            links.append(len(tokens))
        elif token.kind == "close":
            if not links:
                raise MalformedMarkdown(f"a link closes at {i} but none is open")
            opened = links.pop()
            tokens[opened] = Token(tokens[opened].source, "", "open", token.source)
        tokens.append(token)
        i += len(token.source)
        line_start = token.source.endswith("\n")
    if links:
        raise MalformedMarkdown("a link is never closed")
    return tokens


def _next_token(text: str, i: int, line_start: bool) -> Token:
    char = text[i]
    if char == "\\":
        if i + 1 >= len(text):
            raise MalformedMarkdown("a lone backslash ends the text")
        return Token(text[i : i + 2], text[i + 1], "text")
    if char == "`":
        return _code(text, i)
    if char == "]":
        return _link_close(text, i)
    if char == "[" or text.startswith("![", i):
        return Token("[" if char == "[" else "![", "", "open")
    if char == ">" and line_start:
        return Token(char, "", "text")  # a block quote marker
    toggle = next((t for t in _TOGGLES if text.startswith(t, i)), None)
    if toggle is not None:
        return Token(toggle, "", "toggle", toggle)
    run = _PLAIN_RUN.match(text, i)
    source = run.group() if run else char
    return Token(source, source, "text")


def _code(text: str, i: int) -> Token:
    fence = "```" if text.startswith("```", i) else "`"
    j = i + len(fence)
    while j < len(text) and not text.startswith(fence, j):
        j += 2 if text[j] == "\\" else 1
    if j >= len(text):
        raise MalformedMarkdown(f"code opened at {i} is never closed")
    inner = text[i + len(fence) : j]
    if fence == "```" and "\n" in inner:
        first, rest = inner.split("\n", 1)
        inner = rest if first and " " not in first else inner  # a language name is not shown
    visible = re.sub(r"\\(.)", r"\1", inner, flags=re.DOTALL)
    return Token(text[i : j + len(fence)], visible, "atom")


def _link_close(text: str, i: int) -> Token:
    if not text.startswith("](", i):
        raise MalformedMarkdown(f"']' at {i} is not followed by '('")
    j = i + 2
    while j < len(text) and text[j] != ")":
        j += 2 if text[j] == "\\" else 1
    if j >= len(text):
        raise MalformedMarkdown(f"the link target at {i} is never closed")
    return Token(text[i : j + 1], "", "close")


def shorten_markdown_v2(text: str, limit: int) -> str:
    """At most `limit` visible UTF-16 units: the start kept, `…` marking the cut, and every
    entity open at the cut closed again, so Telegram can still parse it."""
    try:
        tokens = tokenize(text)
    except MalformedMarkdown:
        return _shorten_plain(text, limit)
    budget = limit - utf16(MARKER)
    if budget < 0:
        return ""
    kept: list[str] = []
    open_entities: list[str] = []  # closers, innermost last
    used = 0
    for token in tokens:
        cost = utf16(token.visible)
        if used + cost > budget:
            if token.kind == "text" and token.source == token.visible:
                kept.append(_utf16_prefix(token.source, budget - used))
            break
        used += cost
        kept.append(token.source)
        if token.kind == "toggle" and token.closer in open_entities:
            open_entities.remove(token.closer)
        elif token.kind in ("toggle", "open"):
            open_entities.append(token.closer)
        elif token.kind == "close" and token.source in open_entities:
            open_entities.remove(token.source)
    return "".join(kept) + MARKER + _closing(open_entities)


def _closing(open_entities: list[str]) -> str:
    """Closers innermost first, with an empty bold entity between `_` and `__`, which Telegram
    would otherwise read greedily as one underline marker (its documented separator)."""
    out = ""
    for closer in reversed(open_entities):
        if out.endswith("_") and closer.startswith("_"):
            out += "**"
        out += closer
    return out


def _utf16_prefix(text: str, units: int) -> str:
    taken, used = [], 0
    for char in text:
        used += utf16(char)
        if used > units:
            break
        taken.append(char)
    return "".join(taken)


def _shorten_plain(text: str, limit: int) -> str:
    """Structure unknown: drop the markup, cut the text, escape it all (valid, if plain)."""
    plain = re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)
    budget = max(limit - utf16(MARKER), 0)
    if utf16(plain) <= limit:
        return escape_telegram(plain)
    return escape_telegram(_utf16_prefix(plain, budget)) + MARKER


__all__ = [
    "MalformedMarkdown",
    "Token",
    "shorten_markdown_v2",
    "tokenize",
    "utf16",
    "visible_units",
]
