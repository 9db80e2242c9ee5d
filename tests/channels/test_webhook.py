"""The `webhook` kind's deltas (the checks every kind passes are in test_conformance.py): its
custom headers can never change how the request is framed or routed, its secret must be a
Standard Webhooks secret, its limit follows `max_body_bytes`, and what may carry a key — the
signing secret, header values, the URL's password and query values — is never in an outcome.
"""

from __future__ import annotations

import json

import pytest

from tests.channels.harness import CANARY, assert_no_secret, channel, event, send_one
from tests.sink import Answer, Sink
from tidings.channels import signing
from tidings.channels.base import Target
from tidings.channels.webhook import WebhookAdapter
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.outcome import Delivered, Reject

ADAPTER = WebhookAdapter()
URL = "https://receiver.example/hook"


def test_declared_limits() -> None:
    assert ADAPTER.spec.limit == SizeLimit(1_048_576, SizeUnit.BODY_BYTES)
    assert ADAPTER.spec.flavour == "json"
    assert ADAPTER.spec.default_rate_per_min == 0  # a receiver of our own: unlimited


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({"X-Team": "a\r\nX-Injected: 1"}, "config.headers.X-Team"),
        ({"X-Team": "a\nb"}, "config.headers.X-Team"),
        ({"X-Team\r\nX-Injected": "1"}, "config.headers"),
        ({"X Team": "1"}, "config.headers"),
        ({"X-Team:": "1"}, "config.headers"),
        ({"Content-Length": "0"}, "config.headers.Content-Length"),
        ({"transfer-encoding": "chunked"}, "config.headers.transfer-encoding"),
        ({"Host": "internal.example"}, "config.headers.Host"),
        ({"Connection": "close"}, "config.headers.Connection"),
        ({"Upgrade": "websocket"}, "config.headers.Upgrade"),
        ({"Content-Type": "text/plain"}, "config.headers.Content-Type"),
        ({"Webhook-Signature": "v1,forged"}, "config.headers.Webhook-Signature"),
        ({"webhook-id": "msg_1"}, "config.headers.webhook-id"),
    ],
)
def test_headers_that_would_change_the_request_are_refused(
    headers: dict[str, str], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        ADAPTER.validate_config({"url": URL, "headers": headers})
    assert caught.value.field == field


def test_a_nul_in_a_header_is_refused_by_the_declared_shape() -> None:
    with pytest.raises(ValidationError) as caught:
        ADAPTER.validate_config({"url": URL, "headers": {"X-Team": "a\x00b"}})
    assert caught.value.field == "config.headers.X-Team"


def test_ordinary_headers_secret_and_limit_are_kept() -> None:
    config = {
        "url": URL,
        "secret": signing.new_secret(),
        "headers": {"Authorization": "Bearer t0ken", "X-Team": "ops\tsec"},
        "max_body_bytes": 4096,
    }
    assert ADAPTER.validate_config(config) == config
    assert ADAPTER.size_limit(channel("webhook", config)) == 4096


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"url": URL, "secret": f"whsec_{CANARY}%%"}, "config.secret"),
        ({"url": URL, "secret": "whsec_"}, "config.secret"),
        ({"url": URL, "max_body_bytes": 100}, "config.max_body_bytes"),
        ({"url": URL, "max_body_bytes": 64 * 1_048_576}, "config.max_body_bytes"),
    ],
)
def test_bad_secrets_and_limits_are_refused(config: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ADAPTER.validate_config(config)
    assert caught.value.field == field
    assert CANARY not in str(caught.value)


async def test_the_message_is_signed_and_carries_the_custom_headers(sink: Sink) -> None:
    secret = signing.new_secret()
    ch = channel(
        "webhook",
        ADAPTER.validate_config(
            {"url": sink.url("/hook"), "secret": secret, "headers": {"X-Team": "ops"}}
        ),
    )
    outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Delivered)
    (got,) = sink.requests("/hook")
    assert got.headers["x-team"] == "ops"
    assert signing.verify(secret, got.headers, got.body, now=int(got.headers["webhook-timestamp"]))
    assert json.loads(got.body)["type"] == "event"


async def test_keys_in_headers_and_in_the_url_never_reach_an_outcome(sink: Sink) -> None:
    token = f"{CANARY}-bearer"
    url = sink.url("/hook").replace("http://", f"http://user:{CANARY}pw@") + f"?key={CANARY}q"
    ch = channel("webhook", ADAPTER.validate_config({"url": url, "headers": {"X-Api-Key": token}}))
    sink.script("/hook", Answer(404, f"no hook for {token} {CANARY}pw {CANARY}q"))
    outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Reject)
    assert_no_secret(outcome, ch, ADAPTER)
    assert outcome.error.startswith("HTTP 404: no hook for ••••")
    (got,) = sink.requests("/hook")
    assert got.headers["x-api-key"] == token


def test_an_over_long_event_fits_the_configured_limit() -> None:
    ch = channel("webhook", ADAPTER.validate_config({"url": URL, "max_body_bytes": 2048}))
    big = event(1, body="x" * 10_000, data={"blob": "y" * 10_000})
    message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [big], shorten_to=2048)
    assert message.size == len(message.payload) <= 2048
    assert json.loads(message.payload)["event"]["title"] == big.title


def test_an_authorization_header_cannot_go_with_credentials_in_the_url() -> None:
    from tidings.channels.webhook import WebhookAdapter
    from tidings.core.errors import ValidationError

    config = {"url": "https://u:p@h.example/x", "headers": {"Authorization": "Bearer t"}}
    with pytest.raises(ValidationError) as refused:
        WebhookAdapter().validate_config(config)
    assert refused.value.field == "config.headers.Authorization"
    WebhookAdapter().validate_config(config | {"url": "https://h.example/x"})
