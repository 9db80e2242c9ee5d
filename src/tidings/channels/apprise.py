"""The `apprise` kind (optional extra, `pip install tidings[apprise]`): a bridge to any Apprise URL.

Owns loading Apprise lazily (the kind is registered without it and then refuses configs with the
install hint), the limits of the configured services, the address check of user-chosen hosts,
and mapping Apprise's answer to an outcome. Imports apprise (lazily), tidings.channels (base,
chat, http, netguard), tidings.core and tidings.render.

What the mapping can and cannot tell, plainly:
- Apprise does not say whether a failure is worth retrying, nor pass on a provider's rate limit
  or retry hint. Every failure is a Retry(UNEXPECTED) carrying Apprise's log lines (Apprise 2
  returns them per service; with an Apprise that answers a bare bool the error says Apprise gave
  no detail). A revoked token is therefore retried until `max_attempts`, then failed; a
  provider's throttling is never a RateLimited.
- Several URLs, some accepted: Partial (the dispatcher records it as sent; the failed services
  are not retried). With a bare-bool Apprise a mixed result is a failure, and its retry sends
  again to the services that already accepted it.
- Apprise connects on its own (requests, smtplib, …), past tidings' guarded HTTP client. The
  hosts of URLs whose schema takes a user-chosen host (json://, mailto://, ntfy://, …) are
  resolved and checked before each send, so a name that resolves differently a moment later is
  not caught; fixed-host services (tgram://, discord://) reach their vendor's public API.
- The blocking notify runs in a thread, bounded by the channel's `timeout_s` (Apprise's call
  deadline and the services' socket timeouts); a thread still blocked after it is left to end.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import json
import socket
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tidings.channels.base import Adapter, Limits, Message, SendContext, Target
from tidings.channels.chat import scrub_secrets
from tidings.channels.http import MAX_ERROR_CHARS, outcome_for_exception, scrub
from tidings.channels.netguard import BlockedAddress, Network, is_allowed
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome, Partial, Reason, Reject, Retry
from tidings.core.text import truncate_chars
from tidings.render import Flavour, default_renderer

INSTALL_HINT: Final = "the apprise kind needs Apprise: pip install tidings[apprise]"
#: Used when Apprise is missing, and as the ceiling whatever the services allow.
DEFAULT_MAX_CHARS: Final = 32_768
MAX_TITLE_CHARS: Final = 250
MAX_URLS: Final = 20
#: Apprise services vary; 30/min is under the per-minute limits of the common chat services.
DEFAULT_RATE_PER_MIN: Final = 30.0


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
    return module


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


class AppriseAdapter(Adapter):
    kind: ClassVar[str] = "apprise"
    limits: ClassVar[Limits] = Limits(
        max_message_size=DEFAULT_MAX_CHARS,
        size_unit="chars",
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        flavour=Flavour.TEXT.value,
    )
    spec: ClassVar[KindSpec] = KindSpec(
        kind="apprise",
        description="Any service Apprise supports (needs the apprise extra)",
        fields=(
            ConfigField(
                "urls",
                FieldType.STRING_LIST,
                "Apprise URLs; they carry the services' credentials",
                required=True,
                secret=True,
                label="Apprise URLs",
            ),
        ),
        flavour=Flavour.TEXT.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_text_chars=DEFAULT_MAX_CHARS,
    )
    #: Stored as one space-separated string, so reads mask it like any secret.
    secret_fields: ClassVar[tuple[str, ...]] = ("urls",)

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        module = load_apprise()
        if module is None:
            raise ValidationError("config.urls", INSTALL_HINT)
        raw = config.get("urls")
        urls = split_urls(raw)
        if not isinstance(raw, str | list) or not urls:
            raise ValidationError("config.urls", "must be a non-empty list of Apprise URLs")
        if len(urls) > MAX_URLS:
            raise ValidationError("config.urls", f"at most {MAX_URLS} URLs")
        for index, url in enumerate(urls, start=1):
            if module.Apprise.instantiate(url) is None:
                scheme = urlsplit(url).scheme or "(none)"
                raise ValidationError(
                    "config.urls",
                    f"entry {index} (scheme {scheme!r}) is not a complete URL Apprise supports",
                )
        return {**config, "urls": " ".join(urls)}

    def size_limit(self, channel: Channel) -> int | None:
        return profile(str(channel.config.get("urls", ""))).max_body_chars

    def render(
        self,
        channel: Channel,
        target: Target,
        events: Sequence[Event],
        *,
        shorten_to: int | None = None,
        part: int = 1,
        parts: int = 1,
    ) -> Message:
        renderer = default_renderer()
        if target.batch_id is None:
            title = events[0].title or events[0].kind
            body = renderer.event(Flavour.TEXT, channel, events[0])
        else:
            title = f"{len(events)} events" + (f" ({part}/{parts})" if parts > 1 else "")
            body = renderer.digest(Flavour.TEXT, channel, events, part=part, parts=parts)
        shape = profile(str(channel.config.get("urls", "")))
        title = truncate_chars(" ".join(title.split()), shape.max_title_chars)
        if shorten_to is not None:
            if shape.title_in_body:
                title = truncate_chars(title, max(shorten_to // 4, 1))
            body = truncate_chars(body, max(shorten_to - _title_cost(title, shape), 0))
        payload = json.dumps({"title": title, "body": body}, ensure_ascii=False).encode()
        return Message(
            target=target,
            payload=payload,
            size=len(body) + _title_cost(title, shape),
            title=title,
            text=body,
        )

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        urls = split_urls(channel.config.get("urls"))
        module = load_apprise()
        if module is None:
            return Reject(Reason.CLIENT_ERROR, INSTALL_HINT)
        document = json.loads(message.payload)
        timeout_s = channel.timeout_s
        try:
            services = await asyncio.to_thread(_services, module, urls, timeout_s)
            await _check_hosts(services, ctx.http.allowed_networks)
            result = await asyncio.wait_for(
                asyncio.to_thread(_notify, module, services, document, timeout_s),
                timeout=timeout_s + 1.0,
            )
        except TimeoutError:
            outcome: Outcome = Retry(Reason.TIMEOUT, f"Apprise: no answer within {timeout_s:g} s")
        except Exception as error:  # translated at the boundary into an outcome
            outcome = _outcome_for_exception(error)
        else:
            outcome = outcome_for_result(result)
        return scrub_secrets(outcome, secrets_of(urls))


def _title_cost(title: str, shape: Profile) -> int:
    return len(title) + 2 if shape.title_in_body and title else 0


# --- talking to Apprise (in a worker thread) -------------------------------------------------


class InvalidAppriseUrl(ValueError):
    pass


def _services(module: ModuleType, urls: Sequence[str], timeout_s: float) -> list[Any]:
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


def _notify(
    module: ModuleType, services: Sequence[Any], document: dict[str, Any], timeout_s: float
) -> Any:
    bundle = module.Apprise()
    for service in services:
        bundle.add(service)
    options: dict[str, Any] = {"body_format": module.NotifyFormat.TEXT}
    if "timeout" in inspect.signature(bundle.notify).parameters:
        options["timeout"] = timeout_s
    return bundle.notify(body=document["body"] or " ", title=document["title"], **options)


async def _check_hosts(services: Iterable[Any], allowed: Sequence[Network]) -> None:
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


def _outcome_for_exception(error: BaseException) -> Outcome:
    if isinstance(error, InvalidAppriseUrl):
        return Reject(Reason.INVALID_TARGET, str(error))
    if isinstance(error, socket.gaierror):
        return Retry(Reason.CONNECTION, f"cannot resolve an Apprise URL's host: {error}")
    return outcome_for_exception(error)


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
    return sorted({s for s in found if len(s) >= 6}, key=len, reverse=True)


__all__ = [
    "INSTALL_HINT",
    "AppriseAdapter",
    "Profile",
    "load_apprise",
    "outcome_for_result",
    "profile",
    "secrets_of",
]
