"""The known stream: the channels the suite sends to, and a seeded stream of events, published
through the library (PostgreSQL) or through a running `tidings serve`'s API (SQLite), with
idempotency keys so a publish cut off by a fault is simply published again.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import tidings
from tidings.channels import signing

KINDS = ("scan.finding", "monitor.down", "monitor.up", "deploy.done")
SEVERITIES = ("info", "low", "medium", "high", "critical")
#: Sends in a chaos run must end well within the workers' lease (C5: 4 × timeout ≤ lease).
TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ChannelPlan:
    name: str
    path: str
    mode: str = "realtime"
    filter: dict[str, Any] = field(default_factory=dict)
    rate_per_min: float = 0
    rate_burst: int = 1
    max_attempts: int = 4
    digest_period_s: float = 2.0
    tls: bool = False  # sent to the receiver's TLS port


#: Realtime and digest channels, signed webhooks, a few rate limits, a few filters.
CHANNELS = (
    ChannelPlan("rt-all", "/rt-all"),
    ChannelPlan(
        "rt-high", "/rt-high", filter={"min_severity": "high"}, rate_per_min=3000, rate_burst=20
    ),
    ChannelPlan(
        "rt-monitor",
        "/rt-monitor",
        filter={"kinds": ["monitor.*"]},
        rate_per_min=6000,
        rate_burst=50,
        max_attempts=6,
    ),
    ChannelPlan("digest-prod", "/digest-prod", mode="digest", filter={"labels": {"env": "prod"}}),
    ChannelPlan("rt-tls", "/rt-tls", filter={"min_severity": "medium"}, tls=True),
)


@dataclass(frozen=True)
class Secrets:
    """What must never leak (I6): the signing secrets, a header value, a URL query value."""

    signing: dict[str, str]
    header: str
    query: str

    def canaries(self) -> list[str]:
        return [*self.signing.values(), self.header, self.query]


def new_secrets(rng: random.Random) -> Secrets:
    def token(prefix: str) -> str:
        return f"{prefix}{rng.getrandbits(96):024x}"

    signing_secrets = {plan.path: signing.new_secret() for plan in CHANNELS}
    return Secrets(signing_secrets, token("canary-header-"), token("canary-query-"))


async def create_channels(
    hub: tidings.Hub, receiver_port: int, tls_port: int, secrets: Secrets
) -> None:
    for plan in CHANNELS:
        origin = (
            f"https://127.0.0.1:{tls_port}" if plan.tls else f"http://127.0.0.1:{receiver_port}"
        )
        url = f"{origin}{plan.path}?key={secrets.query}"
        await hub.channels.create(
            name=plan.name,
            kind="webhook",
            mode=plan.mode,
            digest_period_s=plan.digest_period_s,
            filter=plan.filter,
            rate_per_min=plan.rate_per_min,
            rate_burst=plan.rate_burst,
            max_attempts=plan.max_attempts,
            retry_backoff_s=0.3,
            timeout_s=TIMEOUT_S,
            config={
                "url": url,
                "secret": secrets.signing[plan.path],
                "headers": {"X-Canary": secrets.header},
            },
        )


def stream(seed: int, tag: str) -> Iterator[dict[str, Any]]:
    """Events drawn from `seed`, without end; each idempotency key names the run (`tag`)."""
    rng = random.Random(seed)
    for i in itertools.count():
        kind = rng.choice(KINDS)
        yield (
            {
                "kind": kind,
                "subject": f"{kind.split('.')[0]}:{rng.randrange(1000)}",
                "severity": rng.choice(SEVERITIES),
                "title": f"event {i}",
                "body": "x" * rng.randrange(0, 400),
                "labels": {"env": rng.choice(("prod", "staging"))},
                "data": {"n": i},
                "idempotency_key": f"{tag}-{i}",
            }
        )


class Publisher:
    """Publishes batches and keeps the keys acknowledged; a failed batch is tried again."""

    def __init__(self, hub: tidings.Hub | None = None, api: tuple[int, str] | None = None) -> None:
        self.hub = hub
        self.api = api  # (port, token) of a `tidings serve`
        self.acknowledged: list[str] = []
        self.failures = 0
        self.last_refusal = ""  # the API's last error answer: "<status> <body>"
        self.refused = asyncio.Event()  # set at each failed publish

    async def publish(self, batch: Sequence[dict[str, Any]], give_up_s: float = 120.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + give_up_s
        while True:
            try:
                await self._once(batch)
            except (OSError, tidings.TidingsError, urllib.error.URLError) as error:
                self.failures += 1
                self.refused.set()
                if isinstance(error, urllib.error.HTTPError):
                    body = error.read(300).decode(errors="replace")
                    self.last_refusal = f"{error.code} {body}"
                if loop.time() > deadline:
                    raise RuntimeError(f"publishing failed for {give_up_s} s: {error}") from error
                await asyncio.sleep(0.2)
                continue
            self.acknowledged.extend(str(e["idempotency_key"]) for e in batch)
            return

    async def _once(self, batch: Sequence[dict[str, Any]]) -> None:
        single = len(batch) == 1  # a single publish: on PostgreSQL it may hand off its rows
        if self.hub is not None:
            if single:
                await self.hub.publish(**batch[0])
            else:
                await self.hub.publish_many(list(batch))
            return
        assert self.api is not None
        await asyncio.to_thread(_post_one if single else _post_batch, self.api, batch)


def _post_one(api: tuple[int, str], batch: Sequence[dict[str, Any]]) -> None:
    port, token = api
    (event,) = batch
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/events",
        json.dumps(event).encode(),
        {"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        if answer.status not in (200, 201):
            raise OSError(f"publish answered {answer.status}")
        answer.read()


def _post_batch(api: tuple[int, str], batch: Sequence[dict[str, Any]]) -> None:
    port, token = api
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/events/batch",
        json.dumps({"events": list(batch)}).encode(),
        {"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        if answer.status not in (200, 201):
            raise OSError(f"publish answered {answer.status}")
        answer.read()
