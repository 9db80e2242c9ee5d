"""The composition root: settings in, a wired runtime out (store, hub, registry, service)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from tidings.channels.netguard import parse_networks
from tidings.channels.registry import Registry
from tidings.config import Settings
from tidings.dispatch import Dispatcher, DispatcherConfig
from tidings.hub import Hub
from tidings.metrics import Metrics
from tidings.service import Service


@dataclass
class Runtime:
    settings: Settings
    hub: Hub
    registry: Registry
    service: Service
    metrics: Metrics

    def dispatcher(self) -> Dispatcher:
        return Dispatcher(
            self.hub.store,
            self.registry,
            dispatcher_config(self.settings),
            metrics=self.metrics,
            notifier=self.hub.notifier,
        )


def dispatcher_config(settings: Settings) -> DispatcherConfig:
    return DispatcherConfig(
        worker_id=settings.worker_id,
        lease_s=settings.lease_s,
        poll_interval_s=settings.poll_interval_s,
        concurrency=settings.concurrency,
        claim_size=settings.claim_size,
        grace_s=settings.grace_s,
        allowed_networks=parse_networks(settings.allowed_private_networks),
    )


@asynccontextmanager
async def runtime(settings: Settings, *, migrate: bool = True) -> AsyncIterator[Runtime]:
    hub = Hub(settings.db)
    try:
        if migrate:
            await hub.migrate()
        registry = Registry.default()
        service = Service(
            hub,
            registry,
            lease_s=settings.lease_s,
            allowed_networks=parse_networks(settings.allowed_private_networks),
        )
        yield Runtime(settings, hub, registry, service, Metrics(hub.store))
    finally:
        await hub.close()
