"""tidings: durable notification delivery.

Producers publish events; tidings fans each one out to the channels whose filter matches,
in realtime or as digests, under rate limits, with retries and an audit row per attempt.
"""

from tidings.core.errors import (
    ConfigError,
    Conflict,
    NotFound,
    StoreError,
    TidingsError,
    ValidationError,
)
from tidings.core.model import (
    Attempt,
    Channel,
    Delivery,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Event,
    EventInput,
    Page,
    PublishResult,
    ResendResult,
    Severity,
)
from tidings.core.states import AttemptStatus, Failure, Mode, SkipReason, State
from tidings.core.version import VERSION
from tidings.heap import settle as settle_heap
from tidings.hub import Hub
from tidings.sync import SyncHub

__all__ = [
    "Attempt",
    "AttemptStatus",
    "Channel",
    "ConfigError",
    "Conflict",
    "Delivery",
    "DeliveryDetail",
    "DeliveryQuery",
    "DeliveryView",
    "Event",
    "EventInput",
    "Failure",
    "Hub",
    "Mode",
    "NotFound",
    "Page",
    "PublishResult",
    "ResendResult",
    "Severity",
    "SkipReason",
    "State",
    "StoreError",
    "SyncHub",
    "TidingsError",
    "ValidationError",
    "settle_heap",
]
__version__ = VERSION
