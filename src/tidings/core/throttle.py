"""Login throttling per client address (S5): a few free failures, then a growing wait.

Keyed by the client's address (IPv6 by its /64, what one host usually holds), so failures
from an attacker's address never delay the real admin logging in from another. Pure: the
caller passes the time; memory is bounded by forgetting the longest-quiet addresses first.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from dataclasses import dataclass

#: Failures an address may make before it has to wait.
FREE_FAILURES = 5
#: The first wait; each further failure doubles it, up to MAX_WAIT_S.
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 900.0
#: An address quiet this long starts afresh.
FORGET_AFTER_S = 3600.0
#: Addresses remembered at most (the quietest are forgotten first).
MAX_ADDRESSES = 10_000


@dataclass(slots=True)
class _Strikes:
    failures: int
    last_at: float
    blocked_until: float


def client_key(address: str | None) -> str:
    """What one client is: its IPv4 address, or its IPv6 /64; unknown clients share a key."""
    if not address:
        return "unknown"
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def wait_after(failures: int) -> float:
    """How long an address waits after its `failures`-th failure in a row."""
    if failures <= FREE_FAILURES:
        return 0.0
    return min(MAX_WAIT_S, FIRST_WAIT_S * 2.0 ** min(failures - FREE_FAILURES - 1, 30))


class LoginThrottle:
    def __init__(self, max_addresses: int = MAX_ADDRESSES) -> None:
        self._strikes: OrderedDict[str, _Strikes] = OrderedDict()
        self._max = max_addresses

    def retry_after(self, key: str, now: float) -> float:
        """Seconds `key` must still wait before its next attempt is heard (0: go ahead)."""
        strikes = self._strikes.get(key)
        if strikes is None:
            return 0.0
        if now - strikes.last_at > FORGET_AFTER_S:
            del self._strikes[key]
            return 0.0
        return max(0.0, strikes.blocked_until - now)

    def failed(self, key: str, now: float) -> float:
        """Count a failure; returns the wait it earns."""
        strikes = self._strikes.pop(key, None)
        if strikes is None or now - strikes.last_at > FORGET_AFTER_S:
            strikes = _Strikes(0, now, now)
        strikes.failures += 1
        strikes.last_at = now
        strikes.blocked_until = now + wait_after(strikes.failures)
        self._strikes[key] = strikes  # most recent last
        while len(self._strikes) > self._max:
            self._strikes.popitem(last=False)
        return strikes.blocked_until - now

    def succeeded(self, key: str) -> None:
        self._strikes.pop(key, None)
