"""The `apprise` kind (optional extra, `pip install tidings[apprise]`): a bridge to any Apprise URL.

Owns the kind's declaration (registered without Apprise installed, it then refuses configs
with the install hint), rendering within the configured services' limits, and sending; talking
to Apprise itself lives in `bridge`. Imports tidings.channels (apprise.bridge, base, failure),
tidings.core and tidings.render.

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
import json
import socket
from collections.abc import Sequence
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tidings.channels.apprise.bridge import (
    DEFAULT_MAX_CHARS,
    InvalidAppriseUrl,
    Profile,
    check_hosts,
    load_apprise,
    notify,
    outcome_for_result,
    profile,
    secrets_of,
    services,
    split_urls,
)
from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.failure import outcome_for_exception
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Outcome, Reason, Reject, Retry
from tidings.core.text import truncate_chars
from tidings.render import Flavour, default_renderer

INSTALL_HINT: Final = "the apprise kind needs Apprise: pip install tidings[apprise]"
MAX_URLS: Final = 20
#: Apprise services vary; 30/min is under the per-minute limits of the common chat services.
DEFAULT_RATE_PER_MIN: Final = 30.0


class AppriseAdapter(Adapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="apprise",
        description="Any service Apprise can reach, by its URLs (needs tidings[apprise]).",
        fields=(
            ConfigField(
                "urls",
                FieldType.STRING_LIST,
                f"The Apprise URLs to notify (at most {MAX_URLS}), e.g. tgram://token/chat; "
                "they carry the services' tokens.",
                required=True,
                secret=True,
                label="Apprise URLs",
            ),
        ),
        flavour=Flavour.TEXT.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_text_chars=DEFAULT_MAX_CHARS,
        example={"urls": ["tgram://123456789:AAYour-Bot-Token/-1001234567890"]},
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Stored as one space-separated string, so reads mask it like any secret."""
        module = load_apprise()
        if module is None:
            raise ValidationError("config.urls", INSTALL_HINT)
        urls = split_urls(config["urls"])
        if not urls:
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

    def secrets_of(self, channel: Channel) -> list[str]:
        """Each URL and every part of it that may carry a token or password: Apprise URLs
        put tokens in the host and path as well (tgram://TOKEN/CHAT)."""
        return secrets_of(split_urls(channel.config.get("urls")))

    def translate(self, error: Exception, channel: Channel) -> Outcome | None:
        if isinstance(error, InvalidAppriseUrl):
            return Reject(Reason.INVALID_TARGET, str(error))
        if isinstance(error, socket.gaierror):
            return Retry(Reason.CONNECTION, f"cannot resolve an Apprise URL's host: {error}")
        return outcome_for_exception(error)

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
            found = await asyncio.to_thread(services, module, urls, timeout_s)
            await check_hosts(found, ctx.http.allowed_networks)
            result = await asyncio.wait_for(
                asyncio.to_thread(notify, module, found, document, timeout_s),
                timeout=timeout_s + 1.0,
            )
        except TimeoutError:
            outcome: Outcome = Retry(Reason.TIMEOUT, f"Apprise: no answer within {timeout_s:g} s")
        except Exception as error:  # translated at the boundary into an outcome
            outcome = self.failure(error, channel)
        else:
            outcome = outcome_for_result(result)
        return self.scrubbed(outcome, channel)


def _title_cost(title: str, shape: Profile) -> int:
    return len(title) + 2 if shape.title_in_body and title else 0


__all__ = [
    "INSTALL_HINT",
    "AppriseAdapter",
    "Profile",
    "load_apprise",
    "outcome_for_result",
    "profile",
    "secrets_of",
]
