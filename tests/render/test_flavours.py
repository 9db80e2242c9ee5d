"""Escaping per flavour: what each service reads as markup is neutralised in every value."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.render import Flavour, default_renderer
from tidings.render.flavours import ZERO_WIDTH_SPACE, escape, escape_url, safe_url

TELEGRAM_SPECIAL = "_*[]()~`>#+-=|{}.!"
TG = Flavour.TELEGRAM_MARKDOWN_V2
# Markdown dialects escaped the CommonMark way: a backslash before ASCII punctuation, and for
# the ones that also read HTML-like tags, < > & as character references.
BACKSLASH_FLAVOURS = [
    Flavour.WECOM_MARKDOWN,
    Flavour.DINGTALK_MARKDOWN,
    Flavour.FEISHU_MARKDOWN,
    Flavour.TEAMS_MARKDOWN,
    Flavour.DISCORD_MARKDOWN,
]
TAG_FLAVOURS = [Flavour.WECOM_MARKDOWN, Flavour.DINGTALK_MARKDOWN, Flavour.FEISHU_MARKDOWN]
INLINE_SPECIAL = {
    Flavour.WECOM_MARKDOWN: "\\`*_[]<>",
    Flavour.DINGTALK_MARKDOWN: "\\`*_[]<>",
    Flavour.FEISHU_MARKDOWN: "\\`*_[]~<>",
    Flavour.TEAMS_MARKDOWN: "\\`*_[]",
    Flavour.DISCORD_MARKDOWN: "\\`*_~|[]<",
}
_COMMONMARK_TOKEN = re.compile(
    r"\\([!-/:-@\[-`{-~])|&(#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);|(.)", re.DOTALL
)
_LINE_OPENER = re.compile(r"(?:^|(?<=\r))[ \t]*(?:[#>+\-=|]|\d+[.)])", re.MULTILINE)


def telegram_unescape(escaped: str) -> str:
    """MarkdownV2's rule: a backslash escapes the character after it. Asserts along the way
    that no special character stands unescaped."""
    out, i = [], 0
    while i < len(escaped):
        if escaped[i] == "\\":
            assert i + 1 < len(escaped), "a trailing lone backslash"
            out.append(escaped[i + 1])
            i += 2
        else:
            assert escaped[i] not in TELEGRAM_SPECIAL, f"unescaped {escaped[i]!r} in {escaped!r}"
            out.append(escaped[i])
            i += 1
    return "".join(out)


def commonmark_unescape(flavour: Flavour, escaped: str) -> str:
    """Backslash escapes (and, for tag-reading flavours, character references) decoded as
    CommonMark does; asserts that no markup character stands unescaped."""
    out = []
    for match in _COMMONMARK_TOKEN.finditer(escaped):
        punct, entity, plain = match.groups()
        if punct is not None:
            out.append(punct)
        elif entity is not None and flavour in TAG_FLAVOURS:
            out.append(html.unescape(match.group()))
        else:
            char = plain if plain is not None else match.group()
            assert char not in INLINE_SPECIAL[flavour], f"unescaped {char!r} in {escaped!r}"
            out.append(char)
    return "".join(out)


# --- Telegram MarkdownV2 ----------------------------------------------------------------------


def test_telegram_escapes_all_eighteen_specials_and_backslash() -> None:
    assert len(TELEGRAM_SPECIAL) == 18
    for char in TELEGRAM_SPECIAL + "\\":
        assert escape(TG, f"a{char}b") == f"a\\{char}b"
    assert escape(TG, "db1 down. disk 95%!") == "db1 down\\. disk 95%\\!"


@settings(max_examples=300)
@given(st.text())
def test_telegram_escape_round_trips_by_the_markdown_v2_rule(text: str) -> None:
    assert telegram_unescape(escape(TG, text)) == text


def test_telegram_link_target_escapes_only_paren_and_backslash() -> None:
    assert escape_url(TG, "https://x.example/a_(b)*c") == "https://x.example/a_(b\\)*c"


# --- Slack, HTML, text ------------------------------------------------------------------------


def test_slack_escapes_amp_lt_gt_only() -> None:
    text = "a & b < c > d *e* _f_ ~g~ `h` <!channel> <@U123>"
    assert escape(Flavour.SLACK_MRKDWN, text) == (
        "a &amp; b &lt; c &gt; d *e* _f_ ~g~ `h` &lt;!channel&gt; &lt;@U123&gt;"
    )


def test_html_escapes_markup_and_quotes() -> None:
    assert escape(Flavour.HTML, "<script>alert('x&y')</script>\"") == (
        "&lt;script&gt;alert(&#x27;x&amp;y&#x27;)&lt;/script&gt;&quot;"
    )


def test_text_is_left_alone() -> None:
    assert escape(Flavour.TEXT, "*a* <b> & \\") == "*a* <b> & \\"


# --- Markdown dialects ------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", BACKSLASH_FLAVOURS)
def test_markdown_inline_markup_is_escaped(flavour: Flavour) -> None:
    escaped = escape(flavour, "*bold* _it_ `code` [link](https://evil.example)")
    for char in "*_`[]":
        assert f"\\{char}" in escaped
    assert "[link]" not in escaped


@pytest.mark.parametrize("flavour", BACKSLASH_FLAVOURS)
def test_markdown_line_openers_are_escaped(flavour: Flavour) -> None:
    escaped = escape(flavour, "# h\n> quote\n- item\n+ item\n  12. item\n===\n| a |")
    assert _LINE_OPENER.search(escaped) is None
    assert "12\\." in escaped


@pytest.mark.parametrize("flavour", TAG_FLAVOURS)
def test_tag_reading_flavours_neutralise_tags_and_mentions(flavour: Flavour) -> None:
    escaped = escape(flavour, '<@userid> <font color="info">x</font> <at id=all></at>')
    assert "<" not in escaped
    assert ">" not in escaped
    assert escape(flavour, "R&D &lt;") == "R&D &amp;lt;"


def test_discord_neutralises_mass_mentions_spoilers_and_user_mentions() -> None:
    escaped = escape(Flavour.DISCORD_MARKDOWN, "@everyone @here ||secret|| ~~x~~ <@123> -# sub")
    assert "@everyone" not in escaped
    assert "@here" not in escaped
    assert f"@{ZERO_WIDTH_SPACE}everyone" in escaped
    assert "\\|\\|secret\\|\\|" in escaped
    assert "\\~\\~x\\~\\~" in escaped
    assert "\\<@123>" in escaped


def test_teams_leaves_angle_brackets_alone() -> None:
    # Adaptive Card TextBlocks do not read HTML; escaping < would show a backslash.
    assert escape(Flavour.TEAMS_MARKDOWN, "a < b & c") == "a < b & c"


@pytest.mark.parametrize("flavour", BACKSLASH_FLAVOURS)
@settings(max_examples=150)
@given(text=st.text(alphabet=st.characters(blacklist_characters=ZERO_WIDTH_SPACE)))
def test_markdown_escape_round_trips_and_leaves_no_markup(flavour: Flavour, text: str) -> None:
    escaped = escape(flavour, text)
    decoded = commonmark_unescape(flavour, escaped)
    if flavour is Flavour.DISCORD_MARKDOWN:
        decoded = decoded.replace("@" + ZERO_WIDTH_SPACE, "@")
    assert decoded == text
    assert _LINE_OPENER.search(escaped) is None


# --- link targets -----------------------------------------------------------------------------

URL = "https://ex.example/a b_(c)?x=1&y=<z>"


@pytest.mark.parametrize(
    ("flavour", "expected"),
    [
        (Flavour.TEXT, "https://ex.example/a%20b_(c)?x=1&y=%3Cz%3E"),
        (Flavour.HTML, "https://ex.example/a%20b_(c)?x=1&amp;y=%3Cz%3E"),
        (Flavour.SLACK_MRKDWN, "https://ex.example/a%20b_(c)?x=1&amp;y=%3Cz%3E"),
        (Flavour.TELEGRAM_MARKDOWN_V2, "https://ex.example/a%20b_(c\\)?x=1&y=%3Cz%3E"),
        (Flavour.WECOM_MARKDOWN, "https://ex.example/a%20b_%28c%29?x=1&y=%3Cz%3E"),
        (Flavour.DISCORD_MARKDOWN, "https://ex.example/a%20b_%28c%29?x=1&y=%3Cz%3E"),
    ],
)
def test_link_targets_per_flavour(flavour: Flavour, expected: str) -> None:
    assert escape_url(flavour, URL) == expected


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,x", "//x", "", "ftp://x"])
def test_only_http_https_mailto_links(url: str) -> None:
    assert safe_url(url) is None
    assert escape_url(Flavour.HTML, url) == ""


def test_mailto_and_percent_escapes_survive() -> None:
    assert escape_url(Flavour.HTML, "mailto:ops@example.com") == "mailto:ops@example.com"
    assert escape_url(Flavour.TEXT, "https://x.example/%E2%9C%93/é") == (
        "https://x.example/%E2%9C%93/%C3%A9"
    )


def test_renderer_escape_is_the_flavour_rule() -> None:
    renderer = default_renderer()
    for flavour in Flavour:
        assert renderer.escape(flavour, "a*b<c>_[d]") == escape(flavour, "a*b<c>_[d]")
