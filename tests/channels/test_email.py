"""The `email` kind against a real SMTP server (aiosmtpd) on loopback: STARTTLS, implicit TLS
and plain; AUTH; every reply class; per-recipient refusals; the 1 MB limit; outbound safety.
The checks every kind passes are in test_conformance.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.channels.harness import (
    CANARY,
    Case,
    assert_no_secret,
    assert_redacted,
    assert_within_limit,
    channel,
    event,
    run_table,
    send_one,
)
from tests.emulators.smtp import Certificates, SmtpEmulator
from tidings.channels.base import Target
from tidings.channels.email import EmailAdapter
from tidings.channels.netguard import parse_networks
from tidings.core.errors import ValidationError
from tidings.core.kinds import SizeLimit, SizeUnit
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Partial, Reason, Reject, Retry
from tidings.dispatch.sending import render_single

ADAPTER = EmailAdapter()
USER = "alerts@example.com"
PASSWORD = f"pw-{CANARY}"
RECIPIENTS = ["ops@example.com", "sec@example.com"]


@pytest.fixture(scope="module")
def certs() -> Iterator[Certificates]:
    certificates = Certificates()
    yield certificates
    certificates.cleanup()


@pytest.fixture
def smtp(certs: Certificates) -> Iterator[SmtpEmulator]:
    with SmtpEmulator(credentials=(USER, PASSWORD), certificates=certs) as emulator:
        yield emulator


def mail_config(emu: SmtpEmulator, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "host": "localhost",
        "port": emu.port,
        "security": emu.security,
        "sender": f"Tidings <{USER}>",
        "recipients": RECIPIENTS,
        "ca_file": emu.ca_file,
    }
    if emu.credentials is not None:
        config |= {"username": USER, "password": PASSWORD}
    return ADAPTER.validate_config(config | overrides)


def mail_channel(emu: SmtpEmulator, **overrides: Any) -> Channel:
    return channel("email", mail_config(emu, **overrides))


def reason(expected: Reason) -> Callable[[Any], bool]:
    return lambda outcome: outcome.reason is expected


# --- every reply class --------------------------------------------------------------------------


async def test_reply_table(smtp: SmtpEmulator) -> None:
    def refusing(**replies: str) -> Callable[[], None]:
        def arrange() -> None:
            smtp.refused.clear()
            for who, reply in replies.items():
                smtp.refuse(f"{who}@example.com", reply)

        return arrange

    def then(command: str, reply: str) -> Callable[[], None]:
        return lambda: (refusing()(), smtp.fail_next(command, reply))[0]

    cases = [
        Case("accepted", refusing(), Delivered),
        Case(
            "one recipient refused",
            refusing(sec="550 5.1.1 User unknown"),
            Partial,
            lambda o: "sec@example.com: 550 5.1.1 User unknown" in o.error,
        ),
        Case(
            "every recipient refused for good",
            refusing(ops="550 5.1.1 User unknown", sec="553 5.1.3 Bad address"),
            Reject,
            reason(Reason.INVALID_TARGET),
        ),
        Case(
            "every recipient greylisted",
            refusing(ops="450 4.2.0 Greylisted", sec="450 4.2.0 Greylisted"),
            Retry,
            reason(Reason.SERVER_ERROR),
        ),
        Case(
            "refused for good and for now",
            refusing(ops="550 5.1.1 User unknown", sec="452 4.5.3 Too many recipients"),
            Retry,
        ),
        Case("MAIL 421", then("MAIL", "421 4.3.2 Service shutting down"), Retry),
        Case("MAIL 451", then("MAIL", "451 4.3.0 Local error"), Retry),
        Case(
            "MAIL 553",
            then("MAIL", "553 5.7.1 Sender not allowed"),
            Reject,
            reason(Reason.INVALID_TARGET),
        ),
        Case(
            "MAIL 552",
            then("MAIL", "552 5.3.4 Message too big"),
            Reject,
            reason(Reason.TOO_LARGE),
        ),
        Case("DATA 452", then("DATA", "452 4.3.1 Insufficient storage"), Retry),
        Case(
            "DATA 554",
            then("DATA", "554 5.7.1 Rejected as spam"),
            Reject,
            lambda o: o.error == "SMTP DATA refused: 554 5.7.1 Rejected as spam",
        ),
        Case(
            "DATA 552",
            then("DATA", "552 5.3.4 Message size exceeds limit"),
            Reject,
            reason(Reason.TOO_LARGE),
        ),
        Case(
            "greeting 421",
            lambda: smtp.greet_next("421 4.3.2 Too busy, try later"),
            Retry,
            reason(Reason.SERVER_ERROR),
        ),
        Case("greeting 554", lambda: smtp.greet_next("554 5.3.2 No SMTP service here"), Reject),
        Case(
            "dropped mid-DATA",
            lambda: smtp.drop_next_data(),
            Retry,
            reason(Reason.CONNECTION),
        ),
    ]
    await run_table(ADAPTER, mail_channel(smtp), cases)
    received = smtp.received()
    assert [m.rcpt_tos for m in received] == [RECIPIENTS, ["ops@example.com"]]


async def test_wrong_password_is_permanent_and_not_shown(smtp: SmtpEmulator) -> None:
    ch = mail_channel(smtp, password=f"wrong-{CANARY}")
    outcome = await send_one(ADAPTER, ch)
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.AUTH
    assert outcome.error.startswith("SMTP AUTH refused: 535")
    assert_no_secret(outcome, ch, ADAPTER)


async def test_mail_without_auth_is_refused_by_the_server(smtp: SmtpEmulator) -> None:
    config = {k: v for k, v in mail_config(smtp).items() if k not in ("username", "password")}
    outcome = await send_one(ADAPTER, channel("email", config))
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.AUTH  # 530


async def test_message_over_the_servers_size_is_refused(certs: Certificates) -> None:
    with SmtpEmulator(security="none", size_limit=500, certificates=certs) as emu:
        outcome = await send_one(ADAPTER, mail_channel(emu))
        assert emu.received() == []
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.TOO_LARGE


# --- TLS and the wire -------------------------------------------------------------------------


@pytest.mark.parametrize("security", ["starttls", "tls", "none"])
async def test_each_security_mode_delivers_a_proper_message(
    certs: Certificates, security: str
) -> None:
    credentials = None if security == "none" else (USER, PASSWORD)
    with SmtpEmulator(security=security, credentials=credentials, certificates=certs) as emu:
        ch = mail_channel(emu)
        nasty = event(title="db1 <down> & out", body="disk <b>95%</b>\nline 2")
        message = ADAPTER.render(ch, Target((1,), message_id="msg_t1"), [nasty])
        assert isinstance(await send_one(ADAPTER, ch, message), Delivered)
        (mail,) = emu.received()
    assert mail.tls is (security != "none")
    assert mail.user == (None if security == "none" else USER)
    assert mail.mail_from == USER
    assert mail.rcpt_tos == RECIPIENTS
    parsed = mail.message
    assert parsed["Subject"] == "db1 <down> & out"
    assert parsed["To"] == ", ".join(RECIPIENTS)
    assert parsed["Date"] is not None
    assert parsed["Auto-Submitted"] == "auto-generated"
    assert parsed.get_content_type() == "multipart/alternative"
    text, html = parsed.iter_parts()
    assert (text.get_content_type(), html.get_content_type()) == ("text/plain", "text/html")
    assert "disk <b>95%</b>" in text.get_content()
    assert "disk &lt;b&gt;95%&lt;/b&gt;" in html.get_content()


@pytest.mark.parametrize("security", ["starttls", "tls"])
async def test_untrusted_certificate_is_refused(certs: Certificates, security: str) -> None:
    with SmtpEmulator(security=security, credentials=(USER, PASSWORD), certificates=certs) as emu:
        config = {k: v for k, v in mail_config(emu).items() if k != "ca_file"}
        refused = await send_one(ADAPTER, channel("email", config))
        accepted = await send_one(ADAPTER, channel("email", config | {"verify": False}))
        assert len(emu.received()) == 1
    assert isinstance(refused, Reject)
    assert refused.reason is Reason.AUTH
    assert "not trusted" in refused.error
    assert isinstance(accepted, Delivered)


async def test_unreadable_ca_file_is_a_configuration_error(smtp: SmtpEmulator) -> None:
    outcome = await send_one(ADAPTER, mail_channel(smtp, ca_file="/nonexistent/ca.pem"))
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.CLIENT_ERROR


async def test_message_id_is_stable_and_digest_subject_counts(smtp: SmtpEmulator) -> None:
    ch = mail_channel(smtp)
    events = [event(1), event(2), event(3)]
    entries = [(1, "msg_a"), (2, "msg_b"), (3, "msg_c")]
    first = ADAPTER.render(ch, Target.digest(1, entries), events, part=1, parts=2)
    again = ADAPTER.render(ch, Target.digest(1, entries), events, part=1, parts=2)
    assert first.payload == again.payload
    assert first.title == "3 events (1/2)"
    assert isinstance(await send_one(ADAPTER, ch, first), Delivered)
    assert isinstance(await send_one(ADAPTER, ch, again), Delivered)
    ids = [m.message["Message-ID"] for m in smtp.received()]
    assert ids[0] == ids[1]
    assert ids[0].startswith(f"<{Target.digest(1, entries).message_id}.")


# --- outbound safety, connection failures ----------------------------------------------------


async def test_loopback_is_refused_unless_allowed(
    smtp: SmtpEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = await send_one(ADAPTER, mail_channel(smtp, host="127.0.0.1"), allowed=())
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.BLOCKED_ADDRESS
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in outcome.error
    assert smtp.connections == 0


async def test_the_address_checked_is_the_address_connected_to(
    smtp: SmtpEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name resolves to an allowed address when checked and to another
    one on any later lookup. The send connects to the checked address, looked up once."""
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo
    answers = iter(["127.0.0.1"])
    lookups: list[str] = []

    async def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        if host != "smtp.rebind.test":
            return await real(host, port, *args, **kwargs)
        # First the allowed address, then one outside the allowed network.
        return await real(next(answers, "127.0.0.2"), port, *args, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", rebinding)
    channel = mail_channel(smtp, host="smtp.rebind.test", verify=False)
    outcome = await send_one(ADAPTER, channel, allowed=parse_networks("127.0.0.1/32"))
    assert isinstance(outcome, Delivered), outcome
    assert lookups == ["smtp.rebind.test"]
    assert len(smtp.received()) == 1


# --- limits -----------------------------------------------------------------------------------


def test_declared_limits() -> None:
    """The message as sent, its per-attempt Date line included, is what is measured."""
    spec = ADAPTER.spec
    assert spec.limit == SizeLimit(1_048_576, SizeUnit.BODY_BYTES)
    assert spec.flavour == "html"
    assert spec.default_rate_per_min > 0


async def test_big_digest_is_cut_into_messages_under_1_mb(smtp: SmtpEmulator) -> None:
    ch = mail_channel(smtp)
    events = [event(i, title=f"finding {i} " + "é" * 3000) for i in range(1, 201)]
    messages = assert_within_limit(ADAPTER, ch, events)
    assert len(messages) >= 2
    assert isinstance(await send_one(ADAPTER, ch, messages[-1]), Delivered)
    last = messages[-1].title
    assert last.endswith(f" events ({len(messages)}/{len(messages)})")
    assert smtp.received()[0].message["Subject"] == last


async def test_huge_single_event_is_shortened_keeping_the_title(smtp: SmtpEmulator) -> None:
    ch = mail_channel(smtp)
    message = render_single(
        ADAPTER, ch, Target((1,), message_id="msg_t1"), event(body="😀" * 150_000)
    )
    assert message.size <= 1_048_576
    assert message.text.startswith("SQL injection in /login #1")
    assert message.text.endswith("…")
    assert isinstance(await send_one(ADAPTER, ch, message), Delivered)


# --- configuration ------------------------------------------------------------------------------


def test_config_is_validated_and_redacted() -> None:
    base = {"host": "smtp.example.com", "sender": USER, "recipients": RECIPIENTS}
    checked = ADAPTER.validate_config(base)
    assert (checked["security"], checked["port"]) == ("starttls", 587)
    assert ADAPTER.validate_config(base | {"security": "tls"})["port"] == 465
    assert ADAPTER.validate_config(base | {"recipients": "a@x.org, b@x.org"})["recipients"] == [
        "a@x.org",
        "b@x.org",
    ]
    secret = base | {"username": USER, "password": PASSWORD}
    assert_redacted(ADAPTER, secret)
    bad = [
        (base | {"host": "smtp.example.com\r\nX: y"}, "config.host"),
        (base | {"port": 0}, "config.port"),
        (base | {"port": True}, "config.port"),
        (base | {"security": "ssl"}, "config.security"),
        (base | {"sender": "not an address"}, "config.sender"),
        (base | {"sender": "a@x.org\r\nBcc: z@x.org"}, "config.sender"),
        (base | {"recipients": []}, "config.recipients"),
        (base | {"recipients": ["ok@x.org", "nope"]}, "config.recipients"),
        (base | {"recipients": [f"r{i}@x.org" for i in range(101)]}, "config.recipients"),
        (base | {"password": PASSWORD}, "config.password"),
        (secret | {"security": "none"}, "config.security"),
        (base | {"verify": "no"}, "config.verify"),
        (base | {"ca_file": ""}, "config.ca_file"),
    ]
    for config, field in bad:
        with pytest.raises(ValidationError) as caught:
            ADAPTER.validate_config(config)
        assert caught.value.field == field, config
        assert CANARY not in str(caught.value)


# --- end to end ---------------------------------------------------------------------------------
