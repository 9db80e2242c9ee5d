"""Secrets in channel config never leave in reads, logs, errors or the UI: `••••` + the last 4.

Pure: imports only the standard library and tidings.core.kinds. Owns the mask, a config as
reads show it (S2: `masked_config`, from the kind's declaration), the strings a secret value
can show up as in a text (`secret_values`), and the redaction of every URL in a text (no
userinfo, no query values), so that any text can be scrubbed before it is stored or logged.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

from tidings.core.kinds import ConfigField, FieldType, KindSpec

MASK = "••••"
#: A shorter value is never searched for in a text: masking every "abc" in an error would
#: garble it and hide nothing worth hiding.
MIN_SECRET_CHARS = 6
#: Parts of a keyed URL shorter than this are path words ("/send", "/hook"), not keys.
MIN_URL_PART_CHARS = 9


def mask(value: str) -> str:
    return MASK + value[-4:] if len(value) > 8 else MASK


def masked_config(spec: KindSpec | None, config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` as every read shows it (API, CLI, UI, export): each secret field masked as a
    whole (each item of a list), a URL with secret parts as scheme, host and path with its
    userinfo and query values masked, a map with secret values with its values masked.
    A kind that declares nothing shows its config as it is."""
    shown = dict(config)
    for field in spec.fields if spec is not None else ():
        value = shown.get(field.name)
        if value is not None and field.sensitive:
            shown[field.name] = mask_value(field, value)
    return shown


def mask_value(field: ConfigField, value: Any) -> Any:
    """One config value as reads show it (see `masked_config`)."""
    if field.secret:
        if isinstance(value, list):
            return [mask(item) if isinstance(item, str) else MASK for item in value]
        return mask(value) if isinstance(value, str) else MASK
    if field.type is FieldType.URL and isinstance(value, str):
        return mask_url(value)
    if isinstance(value, Mapping):
        return {k: mask(v) if isinstance(v, str) else MASK for k, v in value.items()}
    return value


def query_pairs(query: str) -> list[tuple[str, str]]:
    """A query's `name=value` segments, raw (undecoded); a bare `name` has the value ""."""
    return [(name, value) for name, _, value in (p.partition("=") for p in query.split("&") if p)]


def mask_url(url: str) -> str:
    """`url` with its userinfo and every query value masked (each by its decoded value);
    scheme, host, port, path and fragment kept."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = f"{mask(unquote_plus(userinfo))}@{host}" if at else parts.netloc
    query = "&".join(
        f"{name}={mask(unquote_plus(value))}" if value else name
        for name, value in query_pairs(parts.query)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secret_values(spec: KindSpec | None, config: Mapping[str, Any]) -> list[str]:
    """Every string of `config` that must never reach a stored or logged text, longest first:
    each secret field's value and its key-carrying parts, a URL's credentials, a map's
    values. A kind that declares nothing: every string in its config."""
    if spec is None:
        return ordered(secret_strings(dict(config)))
    found: set[str] = set()
    for field in spec.fields:
        value = config.get(field.name)
        if value is None or not field.sensitive:
            continue
        if field.secret or isinstance(value, Mapping):
            found |= secret_strings(value)
        elif isinstance(value, str):
            found |= url_credentials(value)
    return ordered(found)


def redact_config(config: dict[str, Any], secret_fields: Iterable[str]) -> dict[str, Any]:
    redacted = dict(config)
    for name in secret_fields:
        value = redacted.get(name)
        if isinstance(value, str) and value:
            redacted[name] = mask(value)
    return redacted


def secret_strings(value: object) -> set[str]:
    """Every string a secret config value may appear as in a text: the value itself, and for
    each URL in it its query, each query value, its path, its last path segment (Slack's and
    Discord's token) and its userinfo password. Lists and maps contribute their items."""
    if isinstance(value, Mapping):
        return {s for item in value.values() for s in secret_strings(item)}
    if isinstance(value, list | tuple):
        return {s for item in value for s in secret_strings(item)}
    if not isinstance(value, str):
        return set()
    return set(_strings_of(value))


@functools.lru_cache(maxsize=1024)
def _strings_of(value: str) -> frozenset[str]:
    """Cached: a channel's secrets are looked up on every send, and rarely change."""
    if len(value.strip()) < MIN_SECRET_CHARS:
        return frozenset()
    found = {value}
    for word in value.split():
        if len(word) >= MIN_SECRET_CHARS:
            found.add(word)
        if "://" in word:
            found |= url_secret_parts(word)
    return frozenset(found)


def url_secret_parts(url: str) -> set[str]:
    """The parts of a keyed URL that carry its key (see `secret_strings`)."""
    try:
        parts = urlsplit(url)
        password = parts.password or ""
    except ValueError:
        return set()
    last = parts.path.rstrip("/").rpartition("/")[2]
    long_parts = {parts.query, parts.path, last, *(v for _, v in parse_qsl(parts.query))}
    found = {p for p in long_parts if len(p) >= MIN_URL_PART_CHARS}
    if len(password) >= MIN_SECRET_CHARS:
        found.add(password)
    return found


@functools.lru_cache(maxsize=1024)
def url_credentials(url: str) -> frozenset[str]:
    """What may carry a key in a URL whose host and path are not secret themselves (a generic
    webhook): its userinfo password and its query values."""
    try:
        parts = urlsplit(url)
        password = parts.password or ""
    except ValueError:
        return frozenset()
    values = [password, *(v for _, v in parse_qsl(parts.query))]
    return frozenset(v for v in values if len(v) >= MIN_SECRET_CHARS)


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """`url` without userinfo, fragment or query values: scheme://host[:port]/path?…

    Chat webhooks carry their secrets in the query (and some in userinfo), so every message
    that names a URL names this form of it.
    """
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "<unparseable URL>"
    host = parts.netloc.rpartition("@")[2]
    prefix = f"{parts.scheme}:" if parts.scheme else ""
    authority = f"//{host}" if parts.netloc or parts.scheme else ""
    query = "?…" if parts.query else ""
    return f"{prefix}{authority}{parts.path}{query}"


def scrub(text: str) -> str:
    """`text` with every URL in it redacted (exception messages and tracebacks quote them)."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced by its mask; `secrets` longest first, so a key is
    never half-masked inside the URL that holds it."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, mask(secret))
    return text


def ordered(secrets: Iterable[str]) -> list[str]:
    """Secrets longest first, the order `scrub_text` needs."""
    return sorted(set(secrets), key=len, reverse=True)
