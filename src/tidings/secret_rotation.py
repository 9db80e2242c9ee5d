"""Rotating a channel's signing secret with an overlap (S4): a new `whsec_` secret signs at
once, the old one signs beside it (a second signature in `webhook-signature`, as Standard
Webhooks allows) until the grace period ends, so receivers can switch without a gap.

Service level: imports the Hub, the signing helpers of tidings.channels and tidings.core.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tidings.channels import signing
from tidings.core.errors import ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel, rfc3339
from tidings.hub import Hub

DEFAULT_GRACE_S = 24 * 3600.0
MAX_GRACE_S = 30 * 24 * 3600.0
#: The config fields a kind declares to have a rotatable signing secret.
SECRET, PREVIOUS, UNTIL = "secret", "previous_secret", "previous_secret_until"


@dataclass(frozen=True, slots=True)
class NewSecret:
    #: Shown once: the store keeps it encrypted, reads show it masked.
    secret: str
    #: When the previous secret stops signing; None when there was none (or no grace).
    previous_until: datetime | None
    channel: Channel


def rotatable(spec: KindSpec | None) -> bool:
    return spec is not None and all(spec.field(n) for n in (SECRET, PREVIOUS, UNTIL))


async def rotate(
    hub: Hub, channel_id: int, spec: KindSpec | None, grace_s: float = DEFAULT_GRACE_S
) -> NewSecret:
    """A fresh secret for the channel; the one it replaces keeps signing for `grace_s`."""
    if not 0 <= grace_s <= MAX_GRACE_S:
        raise ValidationError("grace_s", f"must be between 0 and {MAX_GRACE_S:g} seconds")
    channel = await hub.channels.get(channel_id)
    if not rotatable(spec):
        raise ValidationError("kind", f"a {channel.kind} channel has no signing secret to rotate")
    config = {k: v for k, v in channel.config.items() if k not in (PREVIOUS, UNTIL)}
    fresh = signing.new_secret()
    old, config[SECRET] = config.get(SECRET), fresh
    until = None
    if old and grace_s > 0:
        until = datetime.now(UTC) + timedelta(seconds=grace_s)
        config |= {PREVIOUS: old, UNTIL: rfc3339(until)}
    updated = await hub.channels.update(channel_id, config=config)
    return NewSecret(fresh, until, updated)


def new_secret() -> str:
    """A fresh `whsec_` secret (`tidings secret new`)."""
    return signing.new_secret()
