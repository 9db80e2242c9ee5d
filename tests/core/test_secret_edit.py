"""S2 and S3 on a declaration: what reads show, masks read back, secrets bound to their
destination."""

from __future__ import annotations

import pytest

from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.redact import MASK, mask, masked_config, secret_values
from tidings.core.secret_edit import restore_secrets

TOKEN = "tok-0123456789abcdef"
SPEC = KindSpec(
    kind="probe",
    description="a kind for these tests",
    fields=(
        ConfigField("url", FieldType.URL, "target", True, secret_parts=True, destination=True),
        ConfigField("headers", FieldType.STRING_MAP, "headers", secret_parts=True),
        ConfigField("token", FieldType.STRING, "a token", secret=True),
        ConfigField("urls", FieldType.STRING_LIST, "keyed URLs", secret=True),
        ConfigField("host", FieldType.STRING, "a host", destination=True),
        ConfigField("note", FieldType.STRING, "not secret"),
    ),
    flavour="text",
)
STORED = {
    "url": f"https://bot:pw-{TOKEN}@hooks.example/in/v1?token={TOKEN}q&page=1",
    "headers": {"Authorization": f"Bearer {TOKEN}h"},
    "token": TOKEN,
    "urls": [f"tgram://{TOKEN}/1", f"json://h.example/?k={TOKEN}2"],
    "host": "mail.example",
    "note": "visible",
}


def test_reads_mask_every_secret_part_and_keep_the_rest() -> None:
    shown = masked_config(SPEC, STORED)
    assert TOKEN not in str(shown)
    assert shown["url"] == (
        f"https://{mask('bot:pw-' + TOKEN)}@hooks.example/in/v1?token={mask(TOKEN + 'q')}"
        f"&page={MASK}"
    )
    assert shown["headers"] == {"Authorization": mask(f"Bearer {TOKEN}h")}
    assert shown["token"] == mask(TOKEN)
    assert shown["urls"] == [mask(u) for u in STORED["urls"]]
    assert (shown["host"], shown["note"]) == ("mail.example", "visible")


def test_a_read_sent_back_keeps_every_stored_secret() -> None:
    assert restore_secrets(SPEC, masked_config(SPEC, STORED), STORED) == STORED


def test_a_url_keeps_its_masked_parts_across_a_new_path() -> None:
    shown = masked_config(SPEC, STORED)["url"].replace("/in/v1", "/in/v2")
    restored = restore_secrets(SPEC, STORED | {"url": shown}, STORED)
    assert restored["url"] == STORED["url"].replace("/in/v1", "/in/v2")


def test_the_bare_mask_keeps_a_whole_secret_as_a_form_sends_it() -> None:
    assert restore_secrets(SPEC, STORED | {"token": MASK}, STORED)["token"] == TOKEN


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("token", MASK + "zzzz"),
        ("headers", {"Authorization": MASK + "zzzz"}),
        ("headers", {"X-Other": mask(f"Bearer {TOKEN}h")}),
        ("urls", [MASK + "nope"]),
        ("url", "https://hooks.example/in/v1?other=" + MASK),
    ],
)
def test_a_mask_that_stands_for_nothing_stored_is_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        restore_secrets(SPEC, STORED | {field: value}, STORED)
    assert refused.value.field.startswith(f"config.{field}")


def test_a_new_channel_cannot_store_a_mask() -> None:
    with pytest.raises(ValidationError, match="enter the secret itself"):
        restore_secrets(SPEC, {"url": "https://h.example/", "token": MASK}, {})


@pytest.mark.parametrize(
    "moved",
    [
        {"host": "evil.example"},
        {"url": "https://evil.example/in/v1"},
        {"url": "http://hooks.example/in/v1"},
        {"url": "https://hooks.example:8443/in/v1"},
    ],
)
def test_s3_a_kept_secret_does_not_follow_a_new_destination(moved: dict[str, str]) -> None:
    edited = masked_config(SPEC, STORED) | moved
    with pytest.raises(ValidationError, match="re-enter the secret for the new destination"):
        restore_secrets(SPEC, edited, STORED)


def test_s3_a_url_with_masked_parts_is_bound_to_its_own_host() -> None:
    shown = masked_config(SPEC, STORED)["url"].replace("hooks.example", "evil.example")
    with pytest.raises(ValidationError) as refused:
        restore_secrets(SPEC, STORED | {"url": shown}, STORED)
    assert refused.value.field == "config.url"


def test_s3_re_entered_secrets_may_go_anywhere() -> None:
    fresh = {"url": "https://new.example/x", "token": "a-new-token-value", "host": "new.example"}
    assert restore_secrets(SPEC, fresh, STORED) == fresh


def test_s3_the_default_port_is_the_same_destination() -> None:
    edited = masked_config(SPEC, STORED)
    edited["url"] = edited["url"].replace("hooks.example", "HOOKS.example:443")
    assert restore_secrets(SPEC, edited, STORED)["url"].startswith("https://bot:pw-")


def test_secret_values_cover_whole_secrets_credentials_and_header_values() -> None:
    found = secret_values(SPEC, STORED)
    assert {TOKEN, f"{TOKEN}q", f"pw-{TOKEN}", f"Bearer {TOKEN}h"} <= set(found)
    assert "hooks.example" not in found
    assert found == sorted(found, key=len, reverse=True)
