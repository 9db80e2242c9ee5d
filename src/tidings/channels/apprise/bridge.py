"""Talking to Apprise: loading it lazily, what the configured services accept, building and
notifying them in a worker thread, checking the hosts their URLs chose, and reading Apprise's
answer as an outcome. Imports apprise (lazily), tidings.channels (http, netguard) and
tidings.core.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import logging
import re
import socket
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final
from urllib.parse import urlsplit

from tidings.channels.http import MAX_ERROR_CHARS
from tidings.channels.netguard import BlockedAddress, Network, is_allowed
from tidings.core.outcome import Delivered, Outcome, Partial, Reason, Reject, Retry
from tidings.core.redact import MIN_SECRET_CHARS, ordered, scrub
from tidings.core.text import truncate_chars

#: Used when Apprise is missing, and as the ceiling whatever the services allow.
DEFAULT_MAX_CHARS: Final = 32_768
MAX_TITLE_CHARS: Final = 250


@functools.cache
def load_apprise() -> ModuleType | None:
    """Apprise with its plugins loaded, or None when it is not installed."""
    try:
        with warnings.catch_warnings():
            # Apprise's e-mail plugin imports `imghdr`, deprecated since Python 3.11.
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module("apprise")
            importlib.import_module("apprise.plugins").N_MGR.load_modules()
    except ImportError:
        return None
    # Apprise's debug lines quote whole requests and answers (a receiver's echo of a token):
    # below WARNING they stay out of the server's log unless an operator asks for them.
    quiet = logging.getLogger("apprise")
    if quiet.level == logging.NOTSET:
        quiet.setLevel(logging.WARNING)
    quiet.addFilter(_no_urls)
    return module


_ANY_URL: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*)://[^\s'\"<>]+")


def _no_urls(record: logging.LogRecord) -> bool:
    """Apprise logs the URLs it loads, and an Apprise URL carries its service's token
    anywhere in it (tgram://TOKEN/chat): every URL in its log lines is cut to its scheme
    (S2). The line is kept."""
    text = record.getMessage()
    if "://" in text:
        record.msg, record.args = _ANY_URL.sub(r"\1://…", text), None
    return True


@dataclass(frozen=True, slots=True)
class Profile:
    """What the configured services accept, in characters."""

    max_body_chars: int = DEFAULT_MAX_CHARS
    max_title_chars: int = MAX_TITLE_CHARS
    #: A service without a title field gets "title\r\nbody" in its body (Apprise's rule).
    title_in_body: bool = False


def split_urls(value: object) -> list[str]:
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list):
        return []
    return [str(item).strip().strip(",") for item in items if str(item).strip().strip(",")]


@functools.lru_cache(maxsize=256)
def profile(urls: str) -> Profile:
    module = load_apprise()
    services = [module.Apprise.instantiate(u) for u in split_urls(urls)] if module else []
    services = [s for s in services if s is not None]
    if not services:
        return Profile()
    titled = [int(s.title_maxlen) for s in services if int(s.title_maxlen) > 0]
    return Profile(
        max_body_chars=min([DEFAULT_MAX_CHARS, *(int(s.body_maxlen) for s in services)]),
        max_title_chars=min([MAX_TITLE_CHARS, *titled]),
        title_in_body=len(titled) < len(services),
    )


# --- talking to Apprise (in a worker thread) -------------------------------------------------


class InvalidAppriseUrl(ValueError):
    pass


def services(module: ModuleType, urls: Sequence[str], timeout_s: float) -> list[Any]:
    services = []
    for index, url in enumerate(urls, start=1):
        service = module.Apprise.instantiate(url)
        if service is None:
            raise InvalidAppriseUrl(f"URL {index} is not one Apprise supports")
        for name in ("socket_connect_timeout", "socket_read_timeout"):
            current = getattr(service, name, None)
            if isinstance(current, int | float):
                setattr(service, name, min(float(current), timeout_s))
        services.append(service)
    return services


def notify(
    module: ModuleType, services: Sequence[Any], document: dict[str, Any], timeout_s: float
) -> Any:
    bundle = module.Apprise()
    for service in services:
        bundle.add(service)
    options: dict[str, Any] = {"body_format": module.NotifyFormat.TEXT}
    if "timeout" in inspect.signature(bundle.notify).parameters:
        options["timeout"] = timeout_s
    return bundle.notify(body=document["body"] or " ", title=document["title"], **options)


async def check_hosts(services: Iterable[Any], allowed: Sequence[Network]) -> None:
    loop = asyncio.get_running_loop()
    for host in {h for service in services for h in _hosts(service)}:
        for info in await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM):
            address = str(info[4][0])
            if not is_allowed(address, allowed):
                raise BlockedAddress(host, address)


def _hosts(service: Any) -> list[str]:
    """The hosts a service connects to that the URL's author chose."""
    tokens = getattr(service, "template_tokens", {}) or {}
    found = [getattr(service, "host", None)] if "host" in tokens else []
    found.append(getattr(service, "smtp_host", None))
    return [h for h in found if isinstance(h, str) and h]


# --- outcomes --------------------------------------------------------------------------------


def outcome_for_result(result: Any) -> Outcome:
    """Apprise 2's AppriseResult by its status; an older Apprise's bool as honestly as it can."""
    status = getattr(getattr(result, "status", None), "name", None)
    if status is None:
        if result:
            return Delivered(provider_response="Apprise: accepted")
        return Retry(
            Reason.UNEXPECTED,
            "Apprise reported a failure and gives no detail "
            "(not which service failed, nor whether retrying can help)",
        )
    detail = _detail(result)
    if status == "SUCCESS":
        return Delivered(provider_response=detail or "Apprise: accepted")
    if status == "PARTIAL":
        return Partial(_cut(f"some Apprise services failed: {detail}"), detail)
    if status == "TIMEOUT":
        return Retry(Reason.TIMEOUT, _cut(f"Apprise: a service did not finish in time: {detail}"))
    if status == "NOMATCH":
        return Reject(Reason.CLIENT_ERROR, "Apprise notified no service")
    return Retry(
        Reason.UNEXPECTED,
        _cut(f"Apprise reported a failure (it cannot say whether retrying helps): {detail}"),
        provider_response=detail or None,
    )


def _detail(result: Any) -> str:
    """Per service: its name, its status and its last warning or error, as Apprise logged."""
    lines = []
    for service in result:
        state = getattr(getattr(service, "status", None), "name", "?")
        logged = [e.message for e in service.logs() if e.level in ("WARNING", "ERROR")]
        words = f": {logged[-1]}" if logged else ""
        lines.append(f"{service.name} {state}{words}")
    return "; ".join(lines)


def _cut(text: str) -> str:
    return truncate_chars(scrub(text), MAX_ERROR_CHARS)


def secrets_of(urls: Iterable[str]) -> list[str]:
    """Each URL and the parts of it that may carry a token or password."""
    found: list[str] = []
    for url in urls:
        found.append(url)
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        found += [parts.netloc, parts.query, parts.password or ""]
        found += parts.path.split("/")
    return ordered(s for s in found if len(s) >= MIN_SECRET_CHARS)


__all__ = [
    "DEFAULT_MAX_CHARS",
    "InvalidAppriseUrl",
    "Profile",
    "check_hosts",
    "load_apprise",
    "notify",
    "outcome_for_result",
    "profile",
    "secrets_of",
    "services",
    "split_urls",
]
