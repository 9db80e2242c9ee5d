"""An edit of a channel's config that sends back what a read showed: each mask (`••••` + the
last 4) is swapped back for the stored secret it stands for, and a secret kept that way stays
bound to its destination (S3): with a changed URL, host, port or transport it is refused.

Pure: imports only the standard library and tidings.core (kinds, redact, errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.redact import MASK, mask, query_pairs

#: Ports a URL without one uses, so `https://h` and `https://h:443` are one destination.
DEFAULT_PORTS = {"http": 80, "https": 443}
REENTER = "re-enter the secret for the new destination"


def restore_secrets(
    spec: KindSpec | None, new: Mapping[str, Any], stored: Mapping[str, Any]
) -> dict[str, Any]:
    """`new` with every mask swapped back for the stored value it stands for.

    A mask that stands for nothing stored (a new channel, another value) is refused: a mask
    is never a secret. When a stored secret is kept and a destination field changed, the
    edit is refused naming that field: the secret would go somewhere its owner never sent it.
    """
    restored = dict(new)
    kept: list[str] = []
    for field in spec.fields if spec is not None else ():
        value = restored.get(field.name)
        if value is None or not field.sensitive or not _holds_mask(value):
            continue
        restored[field.name] = _restored(field, value, stored.get(field.name))
        kept.append(field.name)
    if kept and spec is not None:
        for place in spec.fields:
            name = place.name
            if place.destination and _moved(place, restored.get(name), stored.get(name)):
                secrets = ", ".join(f"config.{k}" for k in kept)
                raise ValidationError(
                    f"config.{name}",
                    f"changes where the stored secrets ({secrets}) are sent: {REENTER}",
                )
    return restored


def _holds_mask(value: object) -> bool:
    if isinstance(value, str):
        return MASK in value
    if isinstance(value, list):
        return any(_holds_mask(item) for item in value)
    if isinstance(value, Mapping):
        return any(_holds_mask(item) for item in value.values())
    return False


def _restored(field: ConfigField, value: Any, stored: Any) -> Any:
    where = f"config.{field.name}"
    if field.secret and isinstance(value, str):
        return _whole(where, value, stored)
    if isinstance(value, list):
        return [_from_list(f"{where}[{i}]", item, stored) for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        old = stored if isinstance(stored, Mapping) else {}
        return {k: _whole(f"{where}.{k}", v, old.get(k)) for k, v in value.items()}
    if field.type is FieldType.URL and isinstance(value, str):
        return _url(where, value, stored if isinstance(stored, str) else "")
    raise _unknown_mask(where)


def _whole(where: str, value: str, stored: object) -> str:
    """A mask read back: the bare mask (a form's "keep") or the stored value's own mask."""
    if MASK not in value:
        return value
    if isinstance(stored, str) and value in (MASK, mask(stored)):
        return stored
    raise _unknown_mask(where)


def _from_list(where: str, value: object, stored: object) -> object:
    """An item of a secret list (Apprise URLs): a mask stands for the stored item it masks."""
    if not isinstance(value, str) or MASK not in value:
        return value
    items = stored if isinstance(stored, list) else []
    matches = [item for item in items if isinstance(item, str) and mask(item) == value]
    if len(matches) != 1:
        raise _unknown_mask(where)
    return matches[0]


def _url(where: str, value: str, stored: str) -> str:
    """A URL with masked userinfo or query values: each masked part becomes the stored one
    (the query value of the same name); host, path and the rest are taken as sent."""
    try:
        parts, old = urlsplit(value), urlsplit(stored)
    except ValueError:
        raise _unknown_mask(where) from None
    userinfo, at, host = parts.netloc.rpartition("@")
    old_userinfo = old.netloc.rpartition("@")[0]
    if at and MASK in unquote_plus(userinfo):
        if unquote_plus(userinfo) not in (MASK, mask(unquote_plus(old_userinfo))):
            raise _unknown_mask(f"{where} (userinfo)")
        userinfo = old_userinfo
    stored_values = dict(query_pairs(old.query))
    segments = []
    for name, raw in query_pairs(parts.query):
        shown = unquote_plus(raw)
        if MASK in shown:
            before = stored_values.get(name)
            if before is None or shown not in (MASK, mask(unquote_plus(before))):
                raise _unknown_mask(f"{where} (query value {name!r})")
            raw = before
        segments.append(f"{name}={raw}" if raw else name)
    netloc = f"{userinfo}@{host}" if at else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(segments), parts.fragment))


def _unknown_mask(where: str) -> ValidationError:
    return ValidationError(
        where, "is a mask that stands for no stored secret: enter the secret itself"
    )


def _moved(field: ConfigField, new: object, old: object) -> bool:
    """The destination changed: a URL's scheme, host or port; any other field's value."""
    if field.type is FieldType.URL and isinstance(new, str) and isinstance(old, str):
        return _origin(new) != _origin(old)
    return new != old


def _origin(url: str) -> tuple[str, str, int | None] | str:
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return url
