"""Standard Webhooks signing: the published vector, round trips, tampering, secrets."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from tidings.channels import signing
from tidings.core.errors import ValidationError

# The Standard Webhooks / Svix reference libraries' published test vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

NOW = 1_700_000_000
BODY = b'{"type":"event","delivery_id":7}'


def test_sign_reproduces_the_published_vector() -> None:
    assert signing.sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == (
        VECTOR_SIGNATURE
    )


def test_sign_matches_the_spec_definition_computed_independently() -> None:
    secret = signing.new_secret()
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, b"msg_1.1700000000." + BODY, hashlib.sha256).digest()
    assert signing.sign(secret, "msg_1", NOW, BODY) == "v1," + base64.b64encode(mac).decode()


def test_the_published_vector_verifies() -> None:
    sent = {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": str(VECTOR_TIMESTAMP),
        "webhook-signature": VECTOR_SIGNATURE,
    }
    assert signing.verify(VECTOR_SECRET, sent, VECTOR_BODY, now=VECTOR_TIMESTAMP)


def test_the_prefix_is_optional_as_in_the_reference_libraries() -> None:
    bare = VECTOR_SECRET.removeprefix("whsec_")
    assert signing.sign(bare, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE


def test_headers_round_trip_through_verify() -> None:
    secret = signing.new_secret()
    sent = signing.headers(secret, "msg_42", NOW, BODY)
    assert set(sent) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert sent["webhook-id"] == "msg_42"
    assert sent["webhook-timestamp"] == str(NOW)
    assert signing.verify(secret, sent, BODY, now=NOW)


def test_header_names_are_matched_without_regard_to_case() -> None:
    secret = signing.new_secret()
    sent = {k.title(): v for k, v in signing.headers(secret, "msg_1", NOW, BODY).items()}
    assert signing.verify(secret, sent, BODY, now=NOW)


def test_headers_without_a_secret_carry_no_signature() -> None:
    for secret in (None, ""):
        assert signing.headers(secret, "msg_1", NOW, BODY) == {
            "webhook-id": "msg_1",
            "webhook-timestamp": str(NOW),
        }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("body", b'{"type":"event","delivery_id":8}'),
        ("webhook-id", "msg_43"),
        ("webhook-timestamp", str(NOW + 1)),
    ],
)
def test_tampering_with_body_id_or_timestamp_fails(field: str, value: str | bytes) -> None:
    secret = signing.new_secret()
    sent = signing.headers(secret, "msg_42", NOW, BODY)
    body = BODY
    if isinstance(value, bytes):
        body = value
    else:
        sent[field] = value
    assert not signing.verify(secret, sent, body, now=NOW)


def test_another_secret_fails() -> None:
    sent = signing.headers(signing.new_secret(), "msg_1", NOW, BODY)
    assert not signing.verify(signing.new_secret(), sent, BODY, now=NOW)


def test_any_of_several_signatures_may_match() -> None:
    old, new = signing.new_secret(), signing.new_secret()
    both = " ".join([signing.sign(old, "msg_1", NOW, BODY), signing.sign(new, "msg_1", NOW, BODY)])
    sent = {"webhook-id": "msg_1", "webhook-timestamp": str(NOW), "webhook-signature": both}
    assert signing.verify(old, sent, BODY, now=NOW)
    assert signing.verify(new, sent, BODY, now=NOW)
    assert not signing.verify(signing.new_secret(), sent, BODY, now=NOW)


def test_only_v1_signatures_count() -> None:
    secret = signing.new_secret()
    digest = signing.sign(secret, "msg_1", NOW, BODY).removeprefix("v1,")
    sent = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(NOW),
        "webhook-signature": f"v1a,{digest} v2,{digest}",
    }
    assert not signing.verify(secret, sent, BODY, now=NOW)


@pytest.mark.parametrize(
    ("offset", "ok"), [(0, True), (300, True), (-300, True), (301, False), (-301, False)]
)
def test_timestamps_outside_the_tolerance_fail(offset: int, ok: bool) -> None:
    secret = signing.new_secret()
    sent = signing.headers(secret, "msg_1", NOW + offset, BODY)
    assert signing.verify(secret, sent, BODY, now=NOW) is ok


def test_the_tolerance_is_adjustable() -> None:
    secret = signing.new_secret()
    sent = signing.headers(secret, "msg_1", NOW - 1000, BODY)
    assert not signing.verify(secret, sent, BODY, now=NOW)
    assert signing.verify(secret, sent, BODY, now=NOW, tolerance_s=1000)


@pytest.mark.parametrize(
    "sent",
    [
        {},
        {"webhook-id": "msg_1", "webhook-timestamp": str(NOW)},
        {"webhook-id": "msg_1", "webhook-timestamp": "soon", "webhook-signature": "v1,x"},
        {"webhook-timestamp": str(NOW), "webhook-signature": "v1,x"},
    ],
)
def test_missing_or_malformed_headers_fail(sent: dict[str, str]) -> None:
    assert not signing.verify(signing.new_secret(), sent, BODY, now=NOW)


def test_new_secrets_are_random_24_byte_keys() -> None:
    first, second = signing.new_secret(), signing.new_secret()
    assert first.startswith("whsec_")
    assert first != second
    assert len(signing.parse_secret(first)) == signing.SECRET_BYTES


@pytest.mark.parametrize(
    "bad",
    ["", "whsec_", "   ", "whsec_SECRET-CANARY-123!!", "whsec_SECRETCANARY1", "whsec_@@@@"],
)
def test_bad_secrets_are_refused_without_echoing_them(bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        signing.parse_secret(bad)
    assert caught.value.field == "config.secret"
    message = str(caught.value)
    assert "CANARY" not in message
    if secret_part := bad.strip().removeprefix("whsec_"):
        assert secret_part not in message
    with pytest.raises(ValidationError):
        signing.sign(bad, "msg_1", NOW, BODY)
