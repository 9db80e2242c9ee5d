"""Kind declarations and the one config check generated from them (S1)."""

from __future__ import annotations

import pytest

from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec, SizeUnit, check_config

SPEC = KindSpec(
    kind="demo",
    description="a kind for tests",
    flavour="text",
    default_rate_per_min=12,
    max_utf16_units=4096,
    fields=(
        ConfigField("url", FieldType.URL, "where to post", required=True, secret=True),
        ConfigField("port", FieldType.INTEGER, "a port", minimum=1, maximum=65535, default=25),
        ConfigField("mode", FieldType.CHOICE, "how", choices=("a", "b")),
        ConfigField("verify", FieldType.BOOLEAN, "check TLS", default=True),
        ConfigField("to", FieldType.STRING_LIST, "recipients"),
        ConfigField("headers", FieldType.STRING_MAP, "extra headers"),
        ConfigField("name", FieldType.STRING, "a name"),
        ConfigField("chat", FieldType.STRING_OR_INTEGER, "a chat id"),
    ),
)


def test_the_limit_carries_its_unit_in_its_name() -> None:
    limit = SPEC.limit
    assert limit is not None
    assert (limit.name, limit.amount, limit.unit) == ("max_utf16_units", 4096, SizeUnit.UTF16_UNITS)
    assert SPEC.secret_fields == ("url",)
    shown = SPEC.as_json()["limit"]
    assert shown == {"name": "max_utf16_units", "amount": 4096, "unit": "utf16_units"}


def test_a_declaration_with_two_limits_or_a_field_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="more than one size limit"):
        KindSpec("x", "", (), "text", max_text_chars=1, max_body_bytes=2)
    field = ConfigField("a", FieldType.STRING, "")
    with pytest.raises(ValueError, match="twice"):
        KindSpec("x", "", (field, field), "text")


def test_an_id_may_be_a_number_or_a_name() -> None:
    assert check_config(SPEC, {"url": "https://x", "chat": -100123})["chat"] == -100123
    assert check_config(SPEC, {"url": "https://x", "chat": "@alerts"})["chat"] == "@alerts"


def test_a_valid_config_comes_back_as_a_copy_without_null_optionals() -> None:
    given = {"url": "https://x.example/h", "port": 587.0, "mode": "a", "name": None}
    checked = check_config(SPEC, given)
    assert checked == {"url": "https://x.example/h", "port": 587, "mode": "a"}
    assert checked is not given


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ([], "config", "must be an object"),
        ({}, "config.url", "is required"),
        ({"url": "https://x", "secrte": "whsec_x"}, "config.secrte", "unknown field"),
        ({"url": "ftp://x"}, "config.url", "http:// or https://"),
        ({"url": "https://x", "port": 0}, "config.port", "between 1 and 65535"),
        ({"url": "https://x", "port": True}, "config.port", "whole number"),
        ({"url": "https://x", "mode": "c"}, "config.mode", "one of a, b"),
        ({"url": "https://x", "verify": "yes"}, "config.verify", "true or false"),
        ({"url": "https://x", "to": []}, "config.to", "non-empty list"),
        ({"url": "https://x", "to": ["a", 3]}, "config.to[1]", "must be a string"),
        ({"url": "https://x", "headers": {"X": 1}}, "config.headers.X", "must be a string"),
        ({"url": "https://x", "name": "  "}, "config.name", "must not be empty"),
        ({"url": "https://x", "name": "a\x00b"}, "config.name", "NUL"),
        ({"url": "https://x", "chat": 1.5}, "config.chat", "whole number or a string"),
        ({"url": "https://x", "chat": True}, "config.chat", "whole number or a string"),
    ],
)
def test_bad_config_names_the_field(config: object, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_config(SPEC, config)
    assert caught.value.field == field
    assert words in caught.value.message
