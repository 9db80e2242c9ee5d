"""`tidings worker --remote URL --token T`: a worker without database credentials (W4).

It leases rendered messages from a tidings server over HTTP, sends them with the same channel
adapters a local dispatcher uses, and reports each outcome; the server writes the state
transitions, fenced by the lease token.

Talks to its server with the standard library's HTTP client in a worker thread: a lease and a
report per poll need no connection pool, and outbound HTTP libraries stay inside
tidings.channels, whose guarded client is for channel targets, not for the operator's own
server. Service level: imports the channel adapters, tidings.dispatch and tidings.core.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tidings.channels.base import SendContext
from tidings.channels.http import HttpClient
from tidings.channels.netguard import Network
from tidings.channels.registry import Registry
from tidings.core.errors import ConfigError
from tidings.dispatch import wire
from tidings.dispatch.report import SendResult
from tidings.dispatch.sending import send

log = logging.getLogger("tidings.remote")
#: How long one call to the server may take.
SERVER_TIMEOUT_S = 60.0


class ServerUnavailable(Exception):
    """The server could not be reached, or answered with an error other than auth."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: following it would carry the bearer token elsewhere."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


#: No proxies from the environment and no redirects: the token goes to the server only.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


class _NoDatabase:
    """A remote worker has no database: the inbox is never leased to it, and a provider's
    config change (Telegram's migrate_to_chat_id) is logged for an operator to apply."""

    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        log.warning(
            "channel %d needs a config change only the server can make: %s",
            channel_id,
            sorted(changes),
        )

    async def inbox_put(self, *args: object) -> None:
        raise RuntimeError("inbox channels are delivered by the server, not by remote workers")


class RemoteWorker:
    def __init__(
        self,
        server: str,
        token: str,
        registry: Registry,
        *,
        worker_id: str,
        kinds: Sequence[str] | None = None,
        tenants: Sequence[str] | None = None,
        poll_interval_s: float = 1.0,
        concurrency: int = 50,
        allowed_networks: Sequence[Network] = (),
    ) -> None:
        if not server.startswith(("http://", "https://")):
            raise ConfigError(
                f"--remote must be an http(s) URL of a tidings server, not {server!r}"
            )
        self.server = server.rstrip("/")
        self.token = token
        self.registry = registry
        self.worker_id = worker_id
        self.kinds = list(kinds) if kinds else None
        self.tenants = list(tenants) if tenants else None
        self.poll_interval_s = poll_interval_s
        self.slots = asyncio.Semaphore(concurrency)
        self.allowed_networks = tuple(allowed_networks)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        async with HttpClient(allowed_networks=self.allowed_networks) as http:
            log.info("remote worker %s started against %s", self.worker_id, self.server)
            while not self._stopping.is_set():
                try:
                    leases = await self._post("/v1/worker/lease", self._lease_request())
                except ServerUnavailable as error:
                    log.warning("cannot lease from %s: %s", self.server, error)
                    leases = {"leases": []}
                work = leases["leases"]
                if work:
                    await asyncio.gather(*(self._serve_lease(http, lease) for lease in work))
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.poll_interval_s)
            log.info("remote worker %s stopped", self.worker_id)

    def _lease_request(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "kinds": self.kinds, "tenants": self.tenants}

    async def _serve_lease(self, http: HttpClient, lease: dict[str, Any]) -> None:
        channel = wire.channel_from_json(lease["channel"])
        adapter = self.registry.get(channel.kind)
        ctx = SendContext(http=http, store=_NoDatabase(), attempt_at=datetime.now(UTC))

        async def one(doc: dict[str, Any]) -> SendResult:
            async with self.slots:
                message = wire.message_from_json(doc)
                return await send(adapter, ctx, channel, message, lambda: datetime.now(UTC))

        results = await asyncio.gather(*(one(doc) for doc in lease["messages"]))
        report = {
            "worker_id": self.worker_id,
            "token": lease["token"],
            "results": [
                {
                    "delivery_ids": list(r.ids),
                    **wire.outcome_to_json(r.outcome),
                    "started_at": r.started_at.isoformat(),
                    "finished_at": r.finished_at.isoformat(),
                }
                for r in results
            ],
        }
        try:
            answer = await self._post("/v1/worker/report", report)
        except ServerUnavailable as error:
            # The lease runs out and the rows are claimable again (C2): nothing is lost.
            log.warning("cannot report to %s: %s", self.server, error)
            return
        if answer.get("fenced"):
            log.warning(
                "fenced %d stale write(s): the lease passed to another worker", answer["fenced"]
            )

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        return await asyncio.to_thread(self._post_blocking, self.server + path, body)

    def _post_blocking(self, url: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with _OPENER.open(request, timeout=SERVER_TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            message = _error_message(error)
            if error.code in (401, 403):
                raise ConfigError(f"the server refused the token: {message}") from None
            raise ServerUnavailable(f"HTTP {error.code}: {message}") from None
        except (OSError, ValueError) as error:  # URLError, timeouts, a body that is not JSON
            raise ServerUnavailable(str(error)) from None


def _error_message(error: urllib.error.HTTPError) -> str:
    """The server's own `{"error": {"message"}}`, else the HTTP reason."""
    try:
        payload = json.loads(error.read())
        return str(payload["error"]["message"])
    except (OSError, ValueError, KeyError, TypeError):
        return str(error.reason)
