"""What a channel adapter's send returns: an outcome, never a bool or a stray exception.

Pure: imports only the standard library and tidings.core. The dispatcher turns an outcome
into a state transition (O1–O4) and its attempt row's status (O7).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias, assert_never

from tidings.core.states import AttemptStatus


class Reason(StrEnum):
    """Why a send did not deliver; a closed set so dashboards and tests can rely on it."""

    AUTH = "auth"
    CLIENT_ERROR = "client_error"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    TOO_LARGE = "too_large"
    INVALID_TARGET = "invalid_target"
    GONE = "gone"
    REDIRECT = "redirect"
    BLOCKED_ADDRESS = "blocked_address"
    RATE_LIMITED = "rate_limited"
    VENDOR_ERROR = "vendor_error"
    #: W3: the worker stopped while the send waited for its answer (it may have arrived).
    INTERRUPTED = "interrupted"
    UNEXPECTED = "unexpected"


@dataclass(frozen=True, slots=True)
class Delivered:
    """O1: the provider accepted the message."""

    provider_response: str | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """O2: a transient failure; try again after the backoff or `retry_after_s`, if longer."""

    reason: Reason
    error: str
    retry_after_s: float | None = None
    provider_response: str | None = None


@dataclass(frozen=True, slots=True)
class RateLimited:
    """O4: the provider is throttling the channel; not the message's fault."""

    error: str
    retry_after_s: float | None = None
    provider_response: str | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """O3: retrying cannot help; `disable_channel` when the target is gone for good (410)."""

    reason: Reason
    error: str
    provider_response: str | None = None
    disable_channel: bool = False


@dataclass(frozen=True, slots=True)
class Partial:
    """Some recipients got the message and some did not (e.g. SMTP refused a few)."""

    error: str
    provider_response: str | None = None


Outcome: TypeAlias = Delivered | Retry | RateLimited | Reject | Partial


def attempt_status(outcome: Outcome) -> AttemptStatus:
    """The status the attempt row records for `outcome`."""
    match outcome:
        case Delivered():
            return AttemptStatus.DELIVERED
        case Retry():
            return AttemptStatus.RETRYABLE
        case RateLimited():
            return AttemptStatus.RATE_LIMITED
        case Reject():
            return AttemptStatus.PERMANENT
        case Partial():
            return AttemptStatus.PARTIAL
        case _:
            assert_never(outcome)
