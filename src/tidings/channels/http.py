"""The one outbound HTTP seam: an aiohttp session behind the address guard, the shared
classification of HTTP answers into outcomes (aiohttp's exceptions are translated in
tidings.channels.failure).
Imports aiohttp (when a client starts), tidings.channels (netguard, resolver, verdict) and
tidings.core; URLs in its messages are redacted by tidings.core.redact.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Final

from yarl import URL

from tidings.channels.netguard import Network, check_literal_host
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.outcome import Delivered, Outcome, Reason
from tidings.core.redact import redact_url, scrub
from tidings.core.retry import parse_retry_after
from tidings.core.text import truncate_chars

if TYPE_CHECKING:
    import aiohttp

MAX_RESPONSE_BYTES: Final = 65536
MAX_ERROR_CHARS: Final = 1000
DNS_CACHE_TTL_S: Final = 10
# No connector-wide limit: the dispatcher's concurrency bounds the sends, and a waiting slot
# would eat into the send's own timeout.
CONNECTION_LIMIT: Final = 0
SCHEMES: Final = frozenset({"http", "https"})


class InvalidTarget(Exception):
    """The URL cannot be sent to (not http/https, no host, malformed); retrying cannot help."""


class RequestTimeout(TimeoutError):
    """A send exceeded its `timeout_s`; carries the limit so the error can name it."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.timeout_s = timeout_s


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP answer, already read. `headers` from HttpClient is a case-insensitive
    CIMultiDictProxy; `classify` also accepts a plain dict and looks names up ignoring case.
    `text` is at most MAX_RESPONSE_BYTES of the body, decoded as UTF-8 (errors replaced)."""

    status: int
    headers: Mapping[str, str]
    text: str


#: Parsed URLs remembered per client (a URL is a channel's; this bounds a churn of them).
CHECKED_URLS_MAX = 1024


class HttpClient:
    """One keep-alive aiohttp session for a dispatcher, refusing non-public targets."""

    def __init__(
        self, *, allowed_networks: Sequence[Network] = (), user_agent: str = "tidings/0.1"
    ) -> None:
        self._allowed = tuple(allowed_networks)
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        # Parsed and address-checked URLs: a channel posts to the same URL over and over.
        self._checked: dict[str, URL] = {}

    @property
    def allowed_networks(self) -> tuple[Network, ...]:
        """The private networks this dispatcher may reach (SMTP hosts honour them too)."""
        return self._allowed

    async def start(self) -> None:
        if self._session is not None:
            return
        # Here rather than at import: aiohttp's import (~80 ms, half of it its default TLS
        # context) is for the processes that send, not for every CLI command or API check
        # that only reads the channel kinds.
        import aiohttp

        from tidings.channels.resolver import GuardedResolver

        connector = aiohttp.TCPConnector(
            resolver=GuardedResolver(self._allowed),
            limit=CONNECTION_LIMIT,
            ttl_dns_cache=DNS_CACHE_TTL_S,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            # Proxies from the environment would bypass the address guard.
            trust_env=False,
            auto_decompress=True,
            # Cookies set by one receiver must never travel to another channel.
            cookie_jar=aiohttp.DummyCookieJar(),
            headers={"User-Agent": self._user_agent},
        )

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> HttpClient:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def post(
        self, url: str, *, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResponse:
        """POST `body`; redirects come back as 3xx answers, never followed.

        Raises InvalidTarget, BlockedAddress (before any connection for IP literals, from
        the resolver for names), RequestTimeout, or aiohttp's errors;
        `failure.outcome_for_exception` turns any of them into an outcome.
        """
        if not timeout_s > 0:
            # aiohttp reads a zero timeout as "none": a send must never hang past its lease.
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        target = self._checked.get(url)
        if target is None:
            target = _target(url)
            # aiohttp skips the resolver for IP literals, so they are checked here, on the
            # same parsed URL object aiohttp will use.
            check_literal_host(target.raw_host or "", self._allowed)
            if len(self._checked) >= CHECKED_URLS_MAX:
                self._checked.clear()
            self._checked[url] = target
        if self._session is None:
            raise RuntimeError("HttpClient.start() must be awaited before post()")
        try:
            async with self._session.post(
                target,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=_timeout(timeout_s),
            ) as response:
                raw = await _read_capped(response.content, MAX_RESPONSE_BYTES)
                return HttpResponse(
                    status=response.status,
                    headers=response.headers,  # read-only already, and ours alone
                    text=raw.decode("utf-8", errors="replace"),
                )
        except TimeoutError as error:  # asyncio's and aiohttp's timeouts alike
            raise RequestTimeout(timeout_s) from error


@functools.lru_cache(maxsize=64)
def _timeout(total_s: float) -> aiohttp.ClientTimeout:
    """One (immutable) timeout object per distinct value: channels share a handful."""
    import aiohttp  # imported by `HttpClient.start` already

    return aiohttp.ClientTimeout(total=total_s)


def _target(url: str) -> URL:
    try:
        target = URL(url)
    except (ValueError, TypeError) as error:
        raise InvalidTarget(f"malformed URL {redact_url(url)}: {error}") from None
    if target.scheme not in SCHEMES:
        raise InvalidTarget(f"{redact_url(url)}: only http:// and https:// URLs can be sent to")
    if not target.raw_host:
        raise InvalidTarget(f"{redact_url(url)}: the URL has no host")
    return target


async def _read_capped(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """At most `limit` bytes of the body; the rest is never read (the connection is then
    closed rather than reused), so a huge answer cannot exhaust memory."""
    first = await stream.read(limit)
    if not first or stream.at_eof() or len(first) >= limit:
        return first  # the usual short answer, whole in one read
    chunks = [first]
    size = len(first)
    while size < limit:
        chunk = await stream.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


# --- classification ---------------------------------------------------------------------


_REJECT, _RETRY = Verdict.REJECT, Verdict.RETRY

#: Specific statuses; 2xx is delivered, and other codes follow their range (`rule_for`).
STATUS_RULES: Final[Mapping[int, StatusRule]] = {
    400: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    401: StatusRule(_REJECT, Reason.AUTH),
    403: StatusRule(_REJECT, Reason.AUTH),
    404: StatusRule(_REJECT, Reason.INVALID_TARGET),
    408: StatusRule(_RETRY, Reason.TIMEOUT),
    410: StatusRule(_REJECT, Reason.GONE, disable_channel=True),
    413: StatusRule(_REJECT, Reason.TOO_LARGE),
    422: StatusRule(_REJECT, Reason.CLIENT_ERROR),
    425: StatusRule(_RETRY, Reason.CLIENT_ERROR),
    429: StatusRule(Verdict.RATE_LIMITED, Reason.RATE_LIMITED),
}


def rule_for(status: int) -> StatusRule:
    """The rule for a status that is not 2xx: the table's entry, else its range's rule."""
    if status in STATUS_RULES:
        return STATUS_RULES[status]
    if 300 <= status <= 399:
        # A redirect could lead anywhere, including past the address guard: never followed.
        return StatusRule(_REJECT, Reason.REDIRECT)
    if 400 <= status <= 499:
        return StatusRule(_REJECT, Reason.CLIENT_ERROR)
    if 500 <= status <= 599:
        return StatusRule(_RETRY, Reason.SERVER_ERROR)
    return StatusRule(_RETRY, Reason.UNEXPECTED)


def classify(response: HttpResponse, now: datetime) -> Outcome:
    """The outcome of an HTTP answer; `error` carries the receiver's own words."""
    body = response.text or None
    if 200 <= response.status <= 299:
        return Delivered(provider_response=body)
    return classify_by(rule_for(response.status), response, now)


def classify_by(
    rule: StatusRule, response: HttpResponse, now: datetime, error: str | None = None
) -> Outcome:
    """`response` classified by `rule` (a vendor table's, or the shared one): the error is
    `error` or the receiver's words, the hint its `Retry-After`. A redirect names where it
    led, without the query."""
    if rule.reason is Reason.REDIRECT:
        error = _redirect_error(response)
    hint = parse_retry_after(header(response.headers, "Retry-After"), now)
    return outcome_for(
        rule,
        _error(response) if error is None else error,
        provider_response=response.text or None,
        retry_after_s=hint,
    )


def header(headers: Mapping[str, str], name: str) -> str | None:
    """`headers[name]`, ignoring case whatever kind of mapping `headers` is."""
    value = headers.get(name)
    if value is not None:
        return value
    wanted = name.casefold()
    return next((v for k, v in headers.items() if k.casefold() == wanted), None)


def _error(response: HttpResponse) -> str:
    words = " ".join(response.text.split())
    text = f"HTTP {response.status}: {words}" if words else f"HTTP {response.status}"
    return truncate_chars(text, MAX_ERROR_CHARS)


def _redirect_error(response: HttpResponse) -> str:
    location = header(response.headers, "Location")
    if location is None:
        return f"HTTP {response.status}: redirect (no Location) not followed"
    return f"HTTP {response.status}: redirect to {redact_url(location)} not followed"


__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_RESPONSE_BYTES",
    "STATUS_RULES",
    "HttpClient",
    "HttpResponse",
    "InvalidTarget",
    "RequestTimeout",
    "StatusRule",
    "classify",
    "classify_by",
    "header",
    "redact_url",
    "rule_for",
    "scrub",
]
