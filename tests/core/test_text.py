"""UTF-8-safe truncation and cleaning (rule O6)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.core.text import (
    LAST_ERROR_MAX_BYTES,
    MARKER,
    PROVIDER_RESPONSE_MAX_BYTES,
    clean,
    has_unstorable,
    storable,
    truncate_chars,
    truncate_utf8,
)

MARKER_BYTES = len(MARKER.encode())  # 3


def test_limits_are_the_contract_values() -> None:
    assert (LAST_ERROR_MAX_BYTES, PROVIDER_RESPONSE_MAX_BYTES, MARKER) == (500, 2000, "…")


def test_ascii_that_fits_is_unchanged() -> None:
    assert truncate_utf8("hello", 5) == "hello"


def test_ascii_cut_leaves_room_for_the_marker() -> None:
    assert truncate_utf8("hello world", 8) == "hello…"


def test_exact_fit_multibyte_is_unchanged() -> None:
    text = "错误" * 2  # 4 chars × 3 bytes = 12 bytes
    assert truncate_utf8(text, 12) == text


@pytest.mark.parametrize(
    ("max_bytes", "expected"),
    [
        (11, "错误…"),  # 8 bytes of budget: two whole 3-byte chars, never a partial third
        (10, "错误…"),
        (9, "错误…"),
        (8, "错…"),
        (6, "错…"),
        (5, "…"),
        (3, "…"),
    ],
)
def test_cjk_is_cut_on_a_character_boundary(max_bytes: int, expected: str) -> None:
    assert truncate_utf8("错误错误", max_bytes) == expected


def test_emoji_four_byte_chars_are_never_split() -> None:
    text = "ok 🚀🚀🚀"  # 3 + 3 × 4 = 15 bytes
    assert truncate_utf8(text, 14) == "ok 🚀🚀…"  # 3 + 8 + 3 = 14 bytes
    assert truncate_utf8(text, 13) == "ok 🚀…"  # 10 bytes; a second rocket would make 14
    assert truncate_utf8(text, 10) == "ok 🚀…"
    assert truncate_utf8(text, 9) == "ok …"


@pytest.mark.parametrize(("max_bytes", "expected"), [(0, ""), (1, ""), (2, "")])
def test_limit_smaller_than_marker_gives_what_fits(max_bytes: int, expected: str) -> None:
    assert truncate_utf8("long text", max_bytes) == expected


def test_ascii_marker_prefix_when_limit_is_tiny() -> None:
    assert truncate_utf8("abcdef", 2, marker="[cut]") == "[c"


def test_negative_limit_is_a_bug() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        truncate_utf8("x", -1)


def test_clean_replaces_nul_and_lone_surrogates() -> None:
    assert clean("a\x00b") == "a\ufffdb"
    assert clean("x\ud800y\udfffz") == "x\ufffdy\ufffdz"
    assert clean("fine ✓ 🚀") == "fine ✓ 🚀"


def test_has_unstorable() -> None:
    assert has_unstorable("a\x00")
    assert has_unstorable("\udc80")
    assert not has_unstorable("plain ✓ 🚀")


def test_truncate_utf8_replaces_unencodable_surrogates_but_keeps_nul() -> None:
    assert truncate_utf8("a\udc80b", 100) == "a\ufffdb"
    assert truncate_utf8("a\x00b", 100) == "a\x00b"


def test_storable() -> None:
    assert storable(None, 10) is None
    assert storable("a\x00b", 10) == "a\ufffdb"
    cut = storable("é" * 600, LAST_ERROR_MAX_BYTES)
    assert cut is not None
    assert len(cut.encode()) <= LAST_ERROR_MAX_BYTES
    assert cut == "é" * 248 + MARKER  # 496 + 3 bytes; a 249th é would need 501


def test_truncate_chars_examples() -> None:
    assert truncate_chars("hello", 5) == "hello"
    assert truncate_chars("hello world", 6) == "hello…"
    assert truncate_chars("错误错误", 3) == "错误…"
    assert truncate_chars("hello", 0) == ""
    assert truncate_chars("hello", 2, marker="[cut]") == "[c"


# --- properties ---------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)
# Includes NUL and lone surrogates, which storable must clean.
raw_texts = st.text(max_size=80)
limits = st.integers(min_value=0, max_value=120)


@settings(max_examples=300, deadline=None)
@given(text=texts, max_bytes=limits)
def test_truncate_utf8_properties(text: str, max_bytes: int) -> None:
    result = truncate_utf8(text, max_bytes)
    encoded = result.encode("utf-8")  # raises if the result were not valid UTF-8
    assert len(encoded) <= max_bytes
    if len(text.encode()) <= max_bytes:
        assert result == text
    elif max_bytes >= MARKER_BYTES:
        assert result.endswith(MARKER)
        kept = result[: -len(MARKER)]
        assert text.startswith(kept)
        # The cut is maximal: one more character would not have fitted.
        assert len(text[: len(kept) + 1].encode()) + MARKER_BYTES > max_bytes
    else:
        assert result == ""


@settings(max_examples=300, deadline=None)
@given(text=raw_texts, max_bytes=limits)
def test_storable_always_encodes_within_limit(text: str, max_bytes: int) -> None:
    result = storable(text, max_bytes)
    assert result is not None
    assert "\x00" not in result
    assert len(result.encode("utf-8")) <= max_bytes
    assert clean(text).startswith(result.removesuffix(MARKER))


@settings(max_examples=300, deadline=None)
@given(text=raw_texts, max_chars=st.integers(min_value=0, max_value=100))
def test_truncate_chars_properties(text: str, max_chars: int) -> None:
    result = truncate_chars(text, max_chars)
    assert len(result) <= max_chars
    if len(text) <= max_chars:
        assert result == text
    elif max_chars >= len(MARKER):
        assert result.endswith(MARKER)
        assert result == text[: max_chars - len(MARKER)] + MARKER
