"""What an SMTP server's replies mean for the message (RFC 5321 §4.2, RFC 4954 for AUTH): the
reply table, per-recipient refusals, and the translation of what aiosmtplib, the resolver or
the address guard raised into an outcome. Imports aiosmtplib, tidings.channels (http,
netguard, verdict) and tidings.core.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Final

import aiosmtplib

from tidings.channels.http import MAX_ERROR_CHARS
from tidings.channels.netguard import BlockedAddress
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.outcome import Delivered, Outcome, Partial, Reason, Reject, Retry
from tidings.core.text import truncate_chars

_RETRY, _REJECT = Verdict.RETRY, Verdict.REJECT

#: SMTP reply code → what it means for the message.
REPLY_CODES: Final[Mapping[int, StatusRule]] = {
    421: StatusRule(_RETRY, Reason.SERVER_ERROR),  # service not available, closing
    450: StatusRule(_RETRY, Reason.SERVER_ERROR),  # mailbox busy (greylisting)
    451: StatusRule(_RETRY, Reason.SERVER_ERROR),  # local error in processing
    452: StatusRule(_RETRY, Reason.SERVER_ERROR),  # insufficient storage
    454: StatusRule(_RETRY, Reason.AUTH),  # temporary authentication failure
    500: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    501: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    502: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    503: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    504: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    530: StatusRule(_REJECT, Reason.AUTH),  # authentication required
    534: StatusRule(_REJECT, Reason.AUTH),  # mechanism too weak
    535: StatusRule(_REJECT, Reason.AUTH),  # credentials invalid
    538: StatusRule(_REJECT, Reason.AUTH),  # encryption required
    550: StatusRule(_REJECT, Reason.INVALID_TARGET),  # mailbox unavailable
    551: StatusRule(_REJECT, Reason.INVALID_TARGET),  # user not local
    552: StatusRule(_REJECT, Reason.TOO_LARGE),  # storage / size exceeded
    553: StatusRule(_REJECT, Reason.INVALID_TARGET),  # mailbox name not allowed
    554: StatusRule(_REJECT, Reason.VENDOR_ERROR),  # transaction failed
}
_STEPS: Final[Mapping[type[Exception], str]] = {
    aiosmtplib.SMTPConnectResponseError: "greeting",
    aiosmtplib.SMTPHeloError: "EHLO refused",
    aiosmtplib.SMTPAuthenticationError: "AUTH refused",
    aiosmtplib.SMTPSenderRefused: "MAIL FROM refused",
    aiosmtplib.SMTPDataError: "DATA refused",
}


class TlsSetupError(Exception):
    """The TLS settings cannot be used (an unreadable `ca_file`): retrying cannot help."""


def rule_for_reply(code: int) -> StatusRule:
    """The table's rule, else the reply's class: 4yz transient, 5yz permanent."""
    if code in REPLY_CODES:
        return REPLY_CODES[code]
    if 400 <= code <= 499:
        return StatusRule(_RETRY, Reason.SERVER_ERROR)
    if 500 <= code <= 599:
        return StatusRule(_REJECT, Reason.VENDOR_ERROR)
    return StatusRule(_RETRY, Reason.UNEXPECTED)


def accepted(
    refused: Mapping[str, aiosmtplib.SMTPResponse], reply: str, recipients: Sequence[str]
) -> Outcome:
    """The outcome of a message the server took: partial when some recipients were refused."""
    if not refused:
        return Delivered(provider_response=reply)
    named = "; ".join(f"{who}: {answer.code} {answer.message}" for who, answer in refused.items())
    error = f"{len(refused)} of {len(recipients)} recipients refused: {named}"
    return Partial(truncate_chars(error, MAX_ERROR_CHARS), provider_response=reply)


def outcome_for_smtp_error(error: BaseException, host: str) -> Outcome | None:
    """Translate what aiosmtplib (or the resolver, or the guard) raised into an outcome; None
    for anything that is no failure of the SMTP exchange (the caller's catch-all reports it)."""
    if isinstance(error, BlockedAddress):
        return Reject(Reason.BLOCKED_ADDRESS, str(error))
    if isinstance(error, TlsSetupError):
        return Reject(Reason.CLIENT_ERROR, str(error))
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        return _all_refused(error.recipients)
    if isinstance(error, aiosmtplib.SMTPResponseException):
        step = next((s for t, s in _STEPS.items() if isinstance(error, t)), "refused")
        return _by_code(error.code, f"SMTP {step}: {error.code} {error.message}")
    verify = _find(error, ssl.SSLCertVerificationError)
    if verify is not None:
        detail = verify.verify_message or str(verify)
        return Reject(Reason.AUTH, f"TLS: the certificate of {host} is not trusted: {detail}")
    if isinstance(error, aiosmtplib.SMTPNotSupported) or type(error) is aiosmtplib.SMTPException:
        return Reject(Reason.CLIENT_ERROR, f"SMTP: {error}")
    if isinstance(error, TimeoutError):
        return Retry(Reason.TIMEOUT, f"SMTP: {error or 'timed out'}")
    if isinstance(error, socket.gaierror):
        return Retry(Reason.CONNECTION, f"cannot resolve {host}: {error}")
    if isinstance(error, ConnectionError | OSError | aiosmtplib.SMTPServerDisconnected):
        return Retry(Reason.CONNECTION, f"SMTP connection failed: {error or type(error).__name__}")
    return None


def _by_code(code: int, error: str) -> Outcome:
    return outcome_for(rule_for_reply(code), truncate_chars(error, MAX_ERROR_CHARS))


def _all_refused(refusals: Sequence[aiosmtplib.SMTPRecipientRefused]) -> Outcome:
    """No recipient accepted: a retry when any refusal was transient (4yz), else permanent."""
    named = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in refusals)
    error = f"every recipient refused: {named}"
    transient = [r for r in refusals if rule_for_reply(r.code).verdict is not _REJECT]
    return _by_code((transient or refusals)[0].code, error)


def _find(error: BaseException, kind: type[ssl.SSLCertVerificationError]) -> Any:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


__all__ = [
    "REPLY_CODES",
    "TlsSetupError",
    "accepted",
    "outcome_for_smtp_error",
    "rule_for_reply",
]
