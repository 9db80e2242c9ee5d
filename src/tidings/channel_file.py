"""The channels file `tidings apply` reads and `tidings export` writes: TOML, one `[[channel]]`
table per channel with the fields a channel is created with (`[channel.config]` its kind's own
settings). Reading names the line of each channel and resolves secrets given as `${ENV_VAR}` or
`@file`; writing masks secrets unless asked not to.

Service level: imports tidings.core (the channel fields, redaction); parses with the standard
library's tomllib and writes TOML itself (the values of a channel are few kinds of thing).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tidings.core.errors import ValidationError
from tidings.core.model import Channel, ChannelSpec
from tidings.core.redact import redact_config
from tidings.textfile import Unreadable, read_text

TABLE = "channel"
_HEADER = re.compile(r"^\s*\[\[\s*channel\s*\]\]")
_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
_ENV = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
#: Fields written before the tables, in this order; None values are left out.
_SCALARS = [f.name for f in fields(ChannelSpec) if f.name not in ("config", "templates")]


class FileError(ValidationError):
    """A channels file that cannot be applied, with where: `FILE:LINE: channel "x": field: …`."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(where, message)


@dataclass(frozen=True, slots=True)
class Declared:
    """One channel as the file declares it, its secrets resolved."""

    fields: dict[str, Any]
    #: `FILE:LINE` of its `[[channel]]` header (or FILE alone when it has none).
    where: str

    @property
    def name(self) -> str:
        return str(self.fields["name"])

    def error(self, error: ValidationError) -> FileError:
        """`error` (about one of this channel's fields) saying where it comes from."""
        reason = error.message.removeprefix(f"{error.field}: ")
        return FileError(f"{self.where}: channel {self.name!r}: {error.field}", reason)


def parse(
    text: str,
    path: str,
    secret_fields: Callable[[str], Iterable[str]],
    environ: Mapping[str, str],
) -> list[Declared]:
    """The channels `text` declares (read from `path`). `secret_fields(kind)` names the config
    fields whose `${ENV_VAR}` / `@file` values are resolved (`@file` relative to `path`)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = _TOML_AT.search(str(error))
        where = f"{path}:{found.group(1)}" if found else path
        raise FileError(where, f"not valid TOML: {_TOML_AT.sub('', str(error)).strip()}") from None
    unknown = sorted(set(doc) - {TABLE})
    if unknown:
        raise FileError(path, f"unknown table {unknown[0]!r}: declare channels as [[channel]]")
    tables = doc.get(TABLE, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise FileError(path, "declare channels as [[channel]] tables")
    lines = [n for n, line in enumerate(text.splitlines(), start=1) if _HEADER.match(line)]
    places = [f"{path}:{n}" for n in lines] if len(lines) == len(tables) else [path] * len(tables)
    declared: list[Declared] = []
    seen: dict[str, str] = {}
    for table, at in zip(tables, places, strict=True):
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise FileError(f"{at}: name", "every channel needs a name")
        if name in seen:
            raise FileError(f"{at}: channel {name!r}", f"declared again (first at {seen[name]})")
        seen[name] = at
        item = Declared(dict(table), at)
        try:
            item = Declared(_resolved(table, Path(path).parent, secret_fields, environ), at)
        except ValidationError as error:
            raise item.error(error) from None
        declared.append(item)
    return declared


def _resolved(
    table: Mapping[str, Any],
    base: Path,
    secret_fields: Callable[[str], Iterable[str]],
    environ: Mapping[str, str],
) -> dict[str, Any]:
    resolved = dict(table)
    config = table.get("config")
    kind = table.get("kind")
    if not isinstance(config, dict) or not isinstance(kind, str):
        return resolved
    config = dict(config)
    for name in secret_fields(kind):
        if name in config:
            config[name] = _secret(config[name], f"config.{name}", base, environ)
    resolved["config"] = config
    return resolved


def _secret(value: Any, where: str, base: Path, environ: Mapping[str, str]) -> Any:
    """`${NAME}`: that environment variable; `@path`: that file's text (one trailing newline
    dropped). Lists and maps of them are resolved item by item; other values are kept."""
    if isinstance(value, list):
        return [_secret(v, f"{where}[{i}]", base, environ) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _secret(v, f"{where}.{k}", base, environ) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    env = _ENV.match(value)
    if env is not None:
        if env.group(1) not in environ:
            raise ValidationError(where, f"the environment variable {env.group(1)} is not set")
        return environ[env.group(1)]
    if value.startswith("@") and len(value) > 1:
        source = base / value[1:]
        try:
            return read_text(source).removesuffix("\n")
        except Unreadable as why:
            raise ValidationError(where, f"cannot read {value[1:]}: {why}") from None
    return value


# -- writing ------------------------------------------------------------------------------


def render(channels: Iterable[Channel], secret_fields: Callable[[str], Iterable[str]]) -> str:
    """The channels as a file `parse` reads back to the same channels. Secrets are masked
    when `secret_fields` names them (applying such a file keeps the stored secrets)."""
    out = ["# tidings channels: apply with `tidings apply -f FILE`."]
    for channel in channels:
        spec = channel.spec()
        out += ["", f"[[{TABLE}]]"]
        for name in _SCALARS:
            value = getattr(spec, name)
            if value is not None:
                out.append(f"{_key(name)} = {_value(value)}")
        config = redact_config(dict(spec.config), secret_fields(channel.kind))
        for table, values in (("config", config), ("templates", spec.templates)):
            if values:
                out.append(f"\n[{TABLE}.{table}]")
                out += [f"{_key(k)} = {_value(v)}" for k, v in values.items()]
    return "\n".join(out) + "\n"


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return ("-" if value < 0 else "") + ("nan" if math.isnan(value) else "inf")
        return repr(value)
    if isinstance(value, str):  # a StrEnum (mode) too
        return _string(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"a channel holds no {type(value).__name__} values")


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, and DEL must be escaped too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
