"""The markup flavours and their escaping rules: the one place that knows which characters each
service reads as markup, in text and in link targets. Imports only the standard library.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from urllib.parse import quote, urlsplit


class Flavour(StrEnum):
    TEXT = "text"  # plain text (email text part, inbox)
    HTML = "html"  # email HTML part
    WECOM_MARKDOWN = "wecom_markdown"  # WeCom markdown (v1) subset
    DINGTALK_MARKDOWN = "dingtalk_markdown"
    FEISHU_MARKDOWN = "feishu_markdown"  # the markdown element inside a Feishu card
    SLACK_MRKDWN = "slack_mrkdwn"
    TEAMS_MARKDOWN = "teams_markdown"  # Adaptive Card TextBlock markdown subset
    DISCORD_MARKDOWN = "discord_markdown"
    TELEGRAM_MARKDOWN_V2 = "telegram_markdown_v2"


SAFE_URL_SCHEMES = frozenset({"http", "https", "mailto"})

_TELEGRAM = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
# Lines end at \n or \r (CommonMark), so a line starts after either.
_LINE_START = re.compile(r"(?:^|(?<=\r))([ \t]*)(?:([#>+\-=|])|(\d+)([.)]))", re.MULTILINE)
# An `&` that would start a character reference (`&lt;`, `&#60;`, `&#x3c;`): the only `&` that
# needs escaping for a reader that decodes entities; a bare `&` ("R&D") stays readable.
_ENTITY_START = re.compile(r"&(?=#\d+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")
_MASS_MENTION = re.compile(r"@(?=everyone|here)")
ZERO_WIDTH_SPACE = "\u200b"


def _backslash(chars: str) -> Callable[[str], str]:
    pattern = re.compile(f"([{re.escape(chars)}])")
    return lambda text: pattern.sub(r"\\\1", text)


def _line_starts(text: str) -> str:
    def escape(match: re.Match[str]) -> str:
        indent, marker, digits, dot = match.groups()
        return f"{indent}\\{marker}" if marker else f"{indent}{digits}\\{dot}"

    return _LINE_START.sub(escape, text)


def _entities(text: str) -> str:
    return _ENTITY_START.sub("&amp;", text).replace("<", "&lt;").replace(">", "&gt;")


_MARKDOWN_INLINE = _backslash("\\`*_[]")
_FEISHU_INLINE = _backslash("\\`*_[]~")
_DISCORD_INLINE = _backslash("\\`*_~|[]<")


def escape_text(text: str) -> str:
    return text


def escape_html(text: str) -> str:
    return html.escape(text, quote=True)


def escape_slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_telegram(text: str) -> str:
    return _TELEGRAM.sub(r"\\\1", text)


def escape_tagged_markdown(text: str) -> str:
    """Markdown dialects that also read HTML-like tags (WeCom `<font>`, `<@userid>`)."""
    return _line_starts(_MARKDOWN_INLINE(_entities(text)))


def escape_feishu(text: str) -> str:
    """Feishu card markdown: tags (`<at>`, `<font>`) and `~~strikethrough~~` too."""
    return _line_starts(_FEISHU_INLINE(_entities(text)))


def escape_teams(text: str) -> str:
    return _line_starts(_MARKDOWN_INLINE(text))


def escape_discord(text: str) -> str:
    return _MASS_MENTION.sub("@" + ZERO_WIDTH_SPACE, _line_starts(_DISCORD_INLINE(text)))


ESCAPES: Mapping[Flavour, Callable[[str], str]] = {
    Flavour.TEXT: escape_text,
    Flavour.HTML: escape_html,
    Flavour.WECOM_MARKDOWN: escape_tagged_markdown,
    Flavour.DINGTALK_MARKDOWN: escape_tagged_markdown,
    Flavour.FEISHU_MARKDOWN: escape_feishu,
    Flavour.SLACK_MRKDWN: escape_slack,
    Flavour.TEAMS_MARKDOWN: escape_teams,
    Flavour.DISCORD_MARKDOWN: escape_discord,
    Flavour.TELEGRAM_MARKDOWN_V2: escape_telegram,
}

#: Between digest entries (and between the header, the entries and the footer). DingTalk and
#: Teams need a blank line for a line break; the others keep one entry per line.
SEPARATORS: Mapping[Flavour, str] = {
    flavour: "\n\n" if flavour in (Flavour.DINGTALK_MARKDOWN, Flavour.TEAMS_MARKDOWN) else "\n"
    for flavour in Flavour
}


def escape(flavour: Flavour, text: str) -> str:
    r"""`text` with everything `flavour` would read as markup neutralised.

    text          unchanged
    html          & < > " ' as character references
    slack_mrkdwn  & < > as &amp; &lt; &gt; and nothing else (Slack's rule: it has no way to
                  escape * _ ~ `, which may format but cannot make links or mentions)
    telegram_*    \ before every one of _ * [ ] ( ) ~ ` > # + - = | { } . ! and \
    wecom, dingtalk, feishu markdown (they also read tags: <font>, <@userid>, <at>):
                  < > as &lt; &gt;, & as &amp; only where it would start a reference;
                  \ before \ ` * _ [ ] (and ~ for Feishu); line starts
    teams         \ before \ ` * _ [ ]; line starts (Adaptive Cards read no HTML)
    discord       \ before \ ` * _ ~ | [ ] <; line starts; a U+200B after the @ of
                  @everyone and @here

    Line starts: a line's first non-blank `# > - + = |`, or the `.`/`)` of `12.`/`12)`, gets a
    backslash, so a value cannot open a heading, quote, list, setext underline or table. The
    start of every value counts as a line start (a value does not know where it lands).
    """
    return ESCAPES[Flavour(flavour)](text)


def safe_url(url: str | None) -> str | None:
    """`url` when its scheme is http, https or mailto; None otherwise (javascript:, data:, …)."""
    if not url:
        return None
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url.strip() if scheme in SAFE_URL_SCHEMES else None


def _normalise_url(url: str, extra_unsafe: str = "") -> str:
    """Percent-encode what may not appear in a URL (RFC 3986), plus `extra_unsafe`."""
    safe = "".join(ch for ch in "!#$%&'()*+,/:;=?@[]~" if ch not in extra_unsafe)
    return quote(url, safe=safe)


def escape_url(flavour: Flavour, url: str) -> str:
    """`url` ready to stand as a link target in `flavour`; "" when its scheme is not safe.

    Characters never valid in a URL (space, controls, non-ASCII, `"<>\\^`{|}`) are
    percent-encoded first; then Telegram escapes `)` and `\\` (MarkdownV2's rule inside a
    link's parentheses), HTML escapes for an attribute, Slack writes `&` as `&amp;`, and the
    markdown dialects percent-encode `(` and `)`.
    """
    checked = safe_url(url)
    if checked is None:
        return ""
    flavour = Flavour(flavour)
    if flavour is Flavour.TELEGRAM_MARKDOWN_V2:
        # MarkdownV2: inside the (...) of a link only `)` and `\` are escaped.
        return _normalise_url(checked).replace("\\", "\\\\").replace(")", "\\)")
    if flavour is Flavour.HTML:
        return html.escape(_normalise_url(checked), quote=True)
    if flavour is Flavour.SLACK_MRKDWN:
        return _normalise_url(checked).replace("&", "&amp;")
    if flavour is Flavour.TEXT:
        return _normalise_url(checked)
    # Markdown link destinations: a bare `(` or `)` ends or confuses `[text](url)` in the
    # simpler parsers (WeCom, DingTalk), so they are percent-encoded.
    return _normalise_url(checked, extra_unsafe="()")
