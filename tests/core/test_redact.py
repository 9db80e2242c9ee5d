"""Secrets out of every text: the mask, what a secret value can appear as, URL redaction."""

from __future__ import annotations

import pytest

from tidings.core.redact import (
    MASK,
    mask,
    ordered,
    redact_config,
    scrub_text,
    secret_strings,
    url_credentials,
)

KEY = "0123456789abcdef"


def test_mask_keeps_the_last_four_of_a_long_value_only() -> None:
    assert mask(KEY) == MASK + "cdef"
    assert mask("short") == MASK


def test_a_keyed_url_contributes_its_key_carrying_parts() -> None:
    url = f"https://hooks.example/services/T1/B1/{KEY}?key={KEY}x"
    found = secret_strings(url)
    assert {url, KEY, f"{KEY}x", f"key={KEY}x", f"/services/T1/B1/{KEY}"} <= found
    assert "/send" not in secret_strings("https://h.example/send?key=" + KEY)  # a path word


def test_userinfo_lists_maps_and_several_urls() -> None:
    assert "s3cr3t-pw" in secret_strings("smtp://user:s3cr3t-pw@mail.example")
    assert {KEY, "other-token"} <= secret_strings({"Authorization": KEY, "X": "other-token"})
    spaced = secret_strings(f"tgram://{KEY}/1 json://h.example/x?t={KEY}2")
    assert {f"tgram://{KEY}/1", f"{KEY}2"} <= spaced
    assert secret_strings(["abc", 42, None]) == set()  # too short to search for, or no text


def test_a_generic_urls_credentials_are_its_password_and_query_values() -> None:
    url = f"https://bot:{KEY}@receiver.example/api/v1/hooks?token={KEY}2&page=1"
    assert url_credentials(url) == {KEY, f"{KEY}2"}  # not the host, not the path
    assert url_credentials("http://[::1") == frozenset()


def test_scrub_text_masks_longest_first() -> None:
    url = f"https://h.example/x?key={KEY}"
    text = f"failed {url} and {KEY}"
    assert scrub_text(text, ordered(secret_strings(url))) == (f"failed {mask(url)} and {mask(KEY)}")


@pytest.mark.parametrize("value", [KEY, f"https://h.example/?k={KEY}"])
def test_redaction_for_reads_and_edits_round_trips(value: str) -> None:
    config = {"secret": value, "name": "visible"}
    shown = redact_config(config, ["secret"])
    assert shown == {"secret": mask(value), "name": "visible"}
    assert shown == {"secret": mask(value), "name": "visible"}
