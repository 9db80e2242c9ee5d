"""The one check a channel passes when it is created or changed, whoever asks (library, API,
admin UI, CLI): the generic fields, a known kind, the config as its adapter checks it, the
kind's default rate, template overrides compiled, and a timeout the lease can hold (C5).

Service level: imports the channel registry, tidings.render, tidings.core (redaction included).
The adapters, the renderer and the dispatcher's lease rule load on the first check, not on
`import tidings`: code that only publishes never needs them (nor aiohttp, which they pull in).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tidings.core import validate
from tidings.core.errors import ConfigError, ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel, ChannelSpec
from tidings.core.secret_edit import restore_secrets

if TYPE_CHECKING:
    from tidings.channels.base import Adapter
    from tidings.channels.registry import Registry

#: The lease a Hub assumes when it is not told (TIDINGS_LEASE_S's default).
DEFAULT_LEASE_S = 120.0


def declared(adapter: Adapter) -> KindSpec | None:
    """The adapter's kind declaration; None for a plugin adapter that declares none."""
    spec = getattr(adapter, "spec", None)
    return spec if isinstance(spec, KindSpec) else None


def secret_fields(adapter: Adapter) -> tuple[str, ...]:
    spec = declared(adapter)
    return spec.secret_fields if spec is not None else ()


class ChannelRules:
    """Turns loose channel fields into a checked ChannelSpec, or raises ValidationError."""

    def __init__(self, registry: Registry | None = None, lease_s: float = DEFAULT_LEASE_S) -> None:
        """`registry` None: the built-in kinds and the installed plugins, on first use."""
        if not lease_s > 0:
            raise ConfigError(f"the lease must be longer than 0 s, not {lease_s!r}")
        self._registry = registry
        self.lease_s = lease_s

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from tidings.channels.registry import Registry

            self._registry = Registry.default()
        return self._registry

    def sensitive_fields(self, kind: str) -> tuple[str, ...] | None:
        """The config fields of `kind` the store keeps encrypted (S4); None for a kind that
        is not registered or declares nothing (then its whole config is)."""
        if kind not in self.registry:
            return None
        spec = declared(self.registry.get(kind))
        return spec.sensitive_fields if spec is not None else None

    def new(self, fields: Mapping[str, Any]) -> ChannelSpec:
        """A new channel: `rate_per_min` absent (or None) takes the kind's default."""
        given = {k: v for k, v in fields.items() if not (k == "rate_per_min" and v is None)}
        spec = validate.channel_spec(**given)
        adapter = self.registry.get(spec.kind)
        # A mask stands for no secret of a new channel: refused, never stored as one.
        restore_secrets(declared(adapter), spec.config, {})
        if "rate_per_min" not in given:
            kind = declared(adapter)
            spec = replace(spec, rate_per_min=kind.default_rate_per_min if kind else 0.0)
        return self._checked(adapter, spec)

    def update(self, current: Channel, changes: Mapping[str, Any]) -> ChannelSpec:
        """`current` with `changes`, checked as a whole. A secret sent back as its mask (what
        a read or an edit form showed) keeps the stored value, but only for the destination it
        was entered for (S3)."""
        changes = dict(changes)
        if changes.pop("kind", current.kind) != current.kind:
            raise ValidationError("kind", "cannot change a channel's kind; create a new channel")
        adapter = self.registry.get(current.kind)
        config = changes.get("config")
        if isinstance(config, Mapping):
            changes["config"] = restore_secrets(declared(adapter), config, current.config)
        return self._checked(adapter, validate.channel_update(current.spec(), **changes))

    def desired(self, fields: Mapping[str, Any], current: Channel | None) -> ChannelSpec:
        """What a declared channel (`ensure`, `tidings apply`) is to be: `current` (None: not
        stored yet) made to match `fields`, every field not given at its default — except
        `enabled`, which only changes when given. A secret given as its mask keeps the stored
        value; one that cannot (a new channel, a field not stored) is refused."""
        given = dict(fields)
        if current is not None:
            if given.get("kind", current.kind) != current.kind:
                raise ValidationError(
                    "kind", f"is {current.kind!r} for the stored channel and cannot change"
                )
            given.setdefault("enabled", current.enabled)
        config = given.get("config")
        if isinstance(config, Mapping) and isinstance(given.get("kind"), str):
            adapter = self.registry.get(given["kind"])
            stored = current.config if current is not None else {}
            # A mask keeps the stored secret; one with nothing stored is refused (S3 too).
            given["config"] = restore_secrets(declared(adapter), config, stored)
        return self.new(given)

    def _checked(self, adapter: Adapter, spec: ChannelSpec) -> ChannelSpec:
        from tidings.render import default_renderer

        config = adapter.validate_config(dict(spec.config))
        # Overrides are compiled (and tried on a sample event) when saved, not at send time.
        templates = default_renderer().validate_templates(spec.templates)
        self.check_timeout(spec.timeout_s)
        return replace(spec, config=config, templates=templates)

    def check_timeout(self, timeout_s: float) -> None:
        """C5: the lease must outlast the slowest send by a wide margin."""
        from tidings.dispatch.dispatcher import LEASE_TIMEOUT_FACTOR

        if timeout_s * LEASE_TIMEOUT_FACTOR > self.lease_s:
            raise ValidationError(
                "timeout_s",
                f"{timeout_s:g} s is too long for the running lease of {self.lease_s:g} s "
                f"(the lease must be at least {LEASE_TIMEOUT_FACTOR} × timeout_s)",
            )


def changed_fields(current: ChannelSpec, desired: ChannelSpec) -> list[str]:
    """The fields `desired` changes, config and template keys one by one (`config.url`)."""
    changed: list[str] = []
    for field in dataclass_fields(ChannelSpec):
        old, new = getattr(current, field.name), getattr(desired, field.name)
        if old == new:
            continue
        if field.name in ("config", "templates"):
            keys = sorted(set(old) | set(new))
            changed += [f"{field.name}.{k}" for k in keys if old.get(k) != new.get(k)]
        else:
            changed.append(field.name)
    return changed
