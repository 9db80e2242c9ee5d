"""What a channel kind declares about itself, once, as data: its config fields, its size limit
with the unit in the limit's name, its markup flavour and its default rate.

Pure: imports only the standard library and tidings.core. Config validation (every path:
library, API, UI, CLI), the API's channel schema, the admin UI's channel form and
`tidings channel kinds` are all generated from these declarations (rule S1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import StrEnum
from typing import Any

from tidings.core.errors import ValidationError
from tidings.core.text import has_unstorable

#: Longest string a config value may hold (a URL with a long query, a PEM path, …).
MAX_VALUE_CHARS = 4096
#: Most entries in a list or map value (recipients, headers, Apprise URLs).
MAX_ENTRIES = 100


class FieldType(StrEnum):
    """The shape of one config value; each maps to one JSON Schema type and one form input."""

    STRING = "string"  # one line of text
    URL = "url"  # an http:// or https:// URL
    INTEGER = "integer"
    #: A whole number or a line of text (a chat id: -1001234567890 or @channelname).
    STRING_OR_INTEGER = "string_or_integer"
    BOOLEAN = "boolean"
    CHOICE = "choice"  # one of the field's `choices`
    STRING_LIST = "string_list"  # a list of strings (the form takes one per line)
    STRING_MAP = "string_map"  # an object of string values (e.g. extra headers)


@dataclass(frozen=True, slots=True)
class ConfigField:
    """One key of a channel's `config`."""

    name: str
    type: FieldType
    description: str
    required: bool = False
    #: The value is a secret as a whole (a token, a password, a keyed vendor URL): never
    #: shown in reads, logs or errors; write-only in forms (S2).
    secret: bool = False
    #: The value holds secrets without being one (S2): a URL's userinfo and query values, a
    #: map's values (request headers). Reads show it with those parts masked.
    secret_parts: bool = False
    #: The value decides where the channel's secrets are sent (a URL, a host, a port, the
    #: transport's security): changing it without re-entering the secrets is refused (S3).
    destination: bool = False
    #: What an absent optional value means (documentation and forms; not stored).
    default: str | int | bool | None = None
    choices: tuple[str, ...] = ()
    #: Bounds of an INTEGER value, inclusive.
    minimum: int | None = None
    maximum: int | None = None
    #: The form's label; the name, spaced and capitalised, when empty.
    label: str = ""

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "type": self.type.value,
            "description": self.description,
            "required": self.required,
            "secret": self.secret,
            "secret_parts": self.secret_parts,
            "destination": self.destination,
        }
        if self.default is not None:
            doc["default"] = self.default
        if self.choices:
            doc["choices"] = list(self.choices)
        if self.minimum is not None:
            doc["minimum"] = self.minimum
        if self.maximum is not None:
            doc["maximum"] = self.maximum
        return doc

    @property
    def sensitive(self) -> bool:
        """Secret as a whole or in parts: encrypted at rest (S4), masked in reads (S2)."""
        return self.secret or self.secret_parts


class SizeUnit(StrEnum):
    """What a kind's size limit counts; the limit's name carries it (`max_<unit>`)."""

    TEXT_BYTES = "text_bytes"  # UTF-8 bytes of the rendered text
    TEXT_CHARS = "text_chars"  # code points of the rendered text
    UTF16_UNITS = "utf16_units"  # UTF-16 code units of the visible text (Telegram)
    BODY_BYTES = "body_bytes"  # bytes of the whole request body or message


@dataclass(frozen=True, slots=True)
class SizeLimit:
    amount: int
    unit: SizeUnit

    @property
    def name(self) -> str:
        """`max_text_bytes`, `max_text_chars`, `max_utf16_units` or `max_body_bytes`."""
        return f"max_{self.unit.value}"


@dataclass(frozen=True, slots=True)
class KindSpec:
    """A channel kind, declared once on its adapter.

    At most one of the `max_…` limits is set: the one the vendor counts. A kind whose limit
    depends on its config (webhook `max_body_bytes`, Apprise per service) declares the default.
    """

    kind: str
    description: str
    fields: tuple[ConfigField, ...]
    #: The markup the kind renders: one of tidings.render.Flavour's values, or "json".
    flavour: str
    #: `rate_per_min` for new channels of this kind (0: unlimited).
    default_rate_per_min: float = 0.0
    max_text_bytes: int | None = None
    max_text_chars: int | None = None
    max_utf16_units: int | None = None
    max_body_bytes: int | None = None
    #: A config that passes the kind's checks, with made-up values: what
    #: `tidings channel kinds` shows a new user.
    example: Mapping[str, Any] = dataclass_field(default_factory=dict)

    def __post_init__(self) -> None:
        limits = [u for u in SizeUnit if getattr(self, f"max_{u.value}") is not None]
        if len(limits) > 1:
            raise ValueError(f"kind {self.kind!r} declares more than one size limit: {limits}")
        names = [f.name for f in self.fields]
        if len(names) != len(set(names)):
            raise ValueError(f"kind {self.kind!r} declares a config field twice")
        for field in self.fields:
            if (field.type is FieldType.CHOICE) != bool(field.choices):
                raise ValueError(f"{self.kind}.{field.name}: choices go with type choice only")
            if field.secret_parts and field.type not in (FieldType.URL, FieldType.STRING_MAP):
                raise ValueError(f"{self.kind}.{field.name}: secret parts are a URL's or a map's")

    @property
    def limit(self) -> SizeLimit | None:
        for unit in SizeUnit:
            amount = getattr(self, f"max_{unit.value}")
            if amount is not None:
                return SizeLimit(int(amount), unit)
        return None

    @property
    def secret_fields(self) -> tuple[str, ...]:
        """Fields secret as a whole."""
        return tuple(f.name for f in self.fields if f.secret)

    @property
    def sensitive_fields(self) -> tuple[str, ...]:
        """Fields secret as a whole or in parts: what the store encrypts (S4)."""
        return tuple(f.name for f in self.fields if f.sensitive)

    @property
    def destination_fields(self) -> tuple[str, ...]:
        """Fields that decide where the secrets go (S3)."""
        return tuple(f.name for f in self.fields if f.destination)

    def field(self, name: str) -> ConfigField | None:
        for field in self.fields:
            if field.name == name:
                return field
        return None

    def as_json(self) -> dict[str, Any]:
        """The declaration as `tidings channel kinds --json` and the API show it."""
        limit = self.limit
        return {
            "kind": self.kind,
            "description": self.description,
            "flavour": self.flavour,
            "default_rate_per_min": self.default_rate_per_min,
            "limit": None
            if limit is None
            else {"name": limit.name, "amount": limit.amount, "unit": limit.unit.value},
            "fields": [f.as_json() for f in self.fields],
            "example": dict(self.example),
        }


def check_config(spec: KindSpec, config: object) -> dict[str, Any]:
    """`config` checked against the kind's declared fields: an object, no unknown keys, every
    required field present, every value of its declared type. Optional fields given as null
    are dropped. Returns a copy; raises ValidationError naming `config.<field>`."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ValidationError("config", "must be an object")
    known = {f.name: f for f in spec.fields}
    for key in sorted(config, key=str):
        if not isinstance(key, str) or key not in known:
            names = ", ".join(sorted(known)) or "none"
            raise ValidationError(
                f"config.{key}", f"unknown field for kind {spec.kind!r} (known: {names})"
            )
    checked: dict[str, Any] = {}
    for field in spec.fields:
        value = config.get(field.name)
        if value is None:
            if field.required:
                raise ValidationError(f"config.{field.name}", "is required")
            continue
        checked[field.name] = _checked_value(field, value)
    return checked


def _checked_value(field: ConfigField, value: object) -> Any:
    where = f"config.{field.name}"
    match field.type:
        case FieldType.STRING:
            return _text(where, value)
        case FieldType.URL:
            url = _text(where, value)
            if not url.lower().startswith(("http://", "https://")):
                raise ValidationError(where, "an http:// or https:// URL is required")
            return url
        case FieldType.INTEGER:
            return _integer(where, value, field.minimum, field.maximum)
        case FieldType.STRING_OR_INTEGER:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if not isinstance(value, str):
                raise ValidationError(where, "must be a whole number or a string")
            return _text(where, value)
        case FieldType.BOOLEAN:
            if not isinstance(value, bool):
                raise ValidationError(where, "must be true or false")
            return value
        case FieldType.CHOICE:
            if not isinstance(value, str) or value not in field.choices:
                raise ValidationError(where, f"must be one of {', '.join(field.choices)}")
            return value
        case FieldType.STRING_LIST:
            return _string_list(where, value)
        case FieldType.STRING_MAP:
            return _string_map(where, value)
    raise AssertionError(field.type)  # pragma: no cover - every FieldType is matched above


def _text(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(where, "must be a string")
    if not value.strip():
        raise ValidationError(where, "must not be empty")
    if has_unstorable(value):
        raise ValidationError(where, "must not contain NUL or unpaired surrogates")
    if len(value) > MAX_VALUE_CHARS:
        raise ValidationError(where, f"must be at most {MAX_VALUE_CHARS} characters")
    return value


def _integer(where: str, value: object, low: int | None, high: int | None) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON may send 25.0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(where, "must be a whole number")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValidationError(where, f"must be between {low} and {high}")
    return value


def _string_list(where: str, value: object) -> str | list[str]:
    """A list of strings, or one string the kind splits itself (commas, spaces)."""
    if isinstance(value, str):
        return _text(where, value)
    if not isinstance(value, list) or not value:
        raise ValidationError(where, "must be a non-empty list of strings")
    if len(value) > MAX_ENTRIES:
        raise ValidationError(where, f"must have at most {MAX_ENTRIES} entries")
    return [_text(f"{where}[{i}]", item) for i, item in enumerate(value)]


def _string_map(where: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValidationError(where, "must be an object of string values")
    if len(value) > MAX_ENTRIES:
        raise ValidationError(where, f"must have at most {MAX_ENTRIES} entries")
    result: dict[str, str] = {}
    for key, item in value.items():
        name = _text(where, key)
        if not isinstance(item, str):
            raise ValidationError(f"{where}.{name}", "must be a string")
        if has_unstorable(item) or len(item) > MAX_VALUE_CHARS:
            raise ValidationError(f"{where}.{name}", "is not a storable string")
        result[name] = item
    return result
