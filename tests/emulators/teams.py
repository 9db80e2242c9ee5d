"""Microsoft Teams as channels.md §5 describes it: a Power Automate "Workflows" trigger
(`POST /workflows/{id}/triggers/manual/paths/invoke?api-version=…&sp=…&sv=1.0&sig=SIG`) and,
for context, a retired O365 connector (`POST /webhookb2/…`).

Workflows checks the `sig`, refuses a body over `max_body_bytes` (28,000) with 413 and more
than `rate_per_s` (4) requests a second with 429, and otherwise answers 202 with an empty
body: the flow run is queued. The run then posts the Adaptive Card — or fails without the
caller ever learning it (an invalid card, or `fail_flow_next`); `runs` records both.
The connector answers 200 `1` on success and 200 with "…returned HTTP error NNN…" text
for its failures (throttling, too large, a bad card).

UNCONFIRMED vendor facts stay switchable: `statuses` (bad `sig`, unknown flow, malformed
JSON, trigger schema mismatch), `retry_after` (whether a 429 carries Retry-After), the byte
limit itself. The JSON error bodies follow Azure's `{"error": {"code", "message"}}` shape;
their codes are this emulator's, not documented vendor facts.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.emulators.base import Emulator, Script, SlidingWindow

FLOW_PATH = "/workflows/{flow}/triggers/manual/paths/invoke"
CONNECTOR_PATH = "/webhookb2/{hook}/IncomingWebhook/{connector}/{token}"
DEFAULT_SIG = "sigsigsigsigsigsigsig0001"
DEFAULT_FLOW = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
CARD = "application/vnd.microsoft.card.adaptive"
QUERY = "api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={sig}"
CONNECTOR_FAILURE = (
    "Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP error "
    "{status} with ContextId tcid=0,server=emulator,cv=emulator.0,MS-CV=emulator.0.."
)

#: HTTP statuses whose real values are UNCONFIRMED.
STATUSES: Mapping[str, int] = {
    "bad_sig": 401,
    "unknown_flow": 404,
    "bad_json": 400,
    "schema_mismatch": 400,
}


@dataclass(frozen=True)
class Scripted:
    """One scripted answer: hang first (seconds), then a raw answer, an echo, or a run
    that fails after the 202."""

    status: int | None = None
    raw: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    hang_s: float = 0.0
    echo: bool = False
    flow_fails: bool = False
    connector_status: int | None = None


@dataclass(frozen=True)
class Run:
    """One flow run: `Succeeded` (the card was posted) or `Failed` (nobody was told)."""

    flow: str
    status: str
    card: dict[str, Any] | None
    error: str = ""


class TeamsEmulator(Emulator):
    def __init__(
        self,
        *,
        max_body_bytes: int = 28_000,
        rate_per_s: int | None = 4,
        retry_after: str | None = None,
        statuses: Mapping[str, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.max_body_bytes = max_body_bytes
        self.rate_per_s = rate_per_s
        self.retry_after = retry_after
        self.statuses = dict(STATUSES) | dict(statuses or {})
        self.clock = clock
        self.flows: dict[str, str] = {}  # flow id → sig
        self.connectors: set[str] = set()  # paths of live connector webhooks
        self.runs: list[Run] = []
        self.answers: list[tuple[int, str]] = []  # (status, body) of every answer
        self._script: Script[Scripted] = Script()
        self._windows: dict[str, SlidingWindow] = {}
        self._state = threading.RLock()

    # -- what tests use ------------------------------------------------------------------

    def flow_url(self, sig: str = DEFAULT_SIG, flow: str = DEFAULT_FLOW) -> str:
        """A Workflows trigger URL (the flow is created if new)."""
        with self._state:
            self.flows[flow] = sig
        return self.url(FLOW_PATH.format(flow=flow) + "?" + QUERY.format(sig=sig))

    def connector_url(self, token: str = "connectortoken0001") -> str:
        """A legacy O365 connector URL (context only: retired by Microsoft)."""
        path = CONNECTOR_PATH.format(hook="hook@tenant", connector="c0nn3ct0r", token=token)
        with self._state:
            self.connectors.add(path)
        return self.url(path)

    def delete_flow(self, flow: str = DEFAULT_FLOW) -> None:
        with self._state:
            self.flows.pop(flow, None)

    def answer_next(
        self, status: int, raw: str = "", headers: Mapping[str, str] | None = None
    ) -> None:
        with self._state:
            self._script.push(Scripted(status=status, raw=raw, headers=dict(headers or {})))

    def hang_next(self, seconds: float) -> None:
        with self._state:
            self._script.push(Scripted(hang_s=seconds))

    def echo_next(self, status: int = 500) -> None:
        """An answer quoting the request's URL (a misbehaving proxy): tests secret scrubbing."""
        with self._state:
            self._script.push(Scripted(status=status, echo=True))

    def fail_flow_next(self) -> None:
        """Accept the next request with 202, then fail its run silently."""
        with self._state:
            self._script.push(Scripted(flow_fails=True))

    def connector_fail_next(self, status: int) -> None:
        """The connector's next answer: 200 with Teams' `status` wrapped in error text."""
        with self._state:
            self._script.push(Scripted(connector_status=status))

    def texts(self) -> list[str]:
        """The TextBlock text of every card a run posted, in order."""
        with self._state:
            runs = [r for r in self.runs if r.status == "Succeeded" and r.card is not None]
        return [str(r.card["body"][0]["text"]) for r in runs if r.card]

    # -- the services --------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post(FLOW_PATH, self._flow), web.post(CONNECTOR_PATH, self._connector)]

    async def _scripted(self, request: web.Request) -> tuple[Scripted | None, web.Response | None]:
        with self._state:
            scripted = self._script.pop()
        if scripted is None:
            return None, None
        await asyncio.sleep(scripted.hang_s)
        if scripted.echo:
            return scripted, self._answer(scripted.status or 500, f"cannot invoke {request.url}")
        if scripted.status is not None:
            return scripted, self._answer(scripted.status, scripted.raw, scripted.headers)
        return scripted, None

    async def _flow(self, request: web.Request) -> web.Response:
        body = await self.record(request)
        scripted, answer = await self._scripted(request)
        if answer is not None:
            return answer
        flow = request.match_info["flow"]
        with self._state:
            refusal = self._refuse(flow, request.query.get("sig"), body)
            if refusal is not None:
                return refusal
            card, error = _card(body)
            if scripted is not None and scripted.flow_fails:
                card, error = None, "ActionFailed: the flow's post step failed"
            self.runs.append(Run(flow, "Failed" if error else "Succeeded", card, error))
            return self._answer(202, "")

    def _refuse(self, flow: str, sig: str | None, body: bytes) -> web.Response | None:
        """What the trigger refuses before queueing a run, in the order it checks."""
        if flow not in self.flows:
            return self._error(
                "unknown_flow", "WorkflowNotFound", f"The workflow '{flow}' could not be found."
            )
        if sig != self.flows[flow]:
            return self._error(
                "bad_sig", "DirectApiAuthorizationRequired", "The request must be authenticated."
            )
        if not self._admit(flow):
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return self._json(429, "TooManyRequests", "Rate limit is exceeded.", headers)
        if len(body) > self.max_body_bytes:
            return self._json(413, "RequestEntityTooLarge", "Request Entity too large")
        try:
            document = json.loads(body)
        except ValueError:
            return self._error(
                "bad_json", "InvalidRequestContent", "The request content is not valid JSON."
            )
        if not isinstance(document, dict) or not isinstance(document.get("attachments"), list):
            return self._error(
                "schema_mismatch",
                "TriggerInputSchemaMismatch",
                "The input body does not match the trigger schema.",
            )
        return None

    async def _connector(self, request: web.Request) -> web.Response:
        body = await self.record(request)
        scripted, answer = await self._scripted(request)
        if answer is not None:
            return answer
        if scripted is not None and scripted.connector_status is not None:
            return self._answer(200, CONNECTOR_FAILURE.format(status=scripted.connector_status))
        with self._state:
            if request.path not in self.connectors:
                return self._answer(200, CONNECTOR_FAILURE.format(status=400))
            if not self._admit(request.path):
                return self._answer(200, CONNECTOR_FAILURE.format(status=429))
            if len(body) > self.max_body_bytes:
                return self._answer(200, CONNECTOR_FAILURE.format(status=413))
            card, error = _card(body)
            if error:
                return self._answer(200, CONNECTOR_FAILURE.format(status=400))
            self.runs.append(Run("connector", "Succeeded", card))
            return self._answer(200, "1")

    def _admit(self, key: str) -> bool:
        if self.rate_per_s is None:
            return True
        window = self._windows.setdefault(key, SlidingWindow(self.rate_per_s, 1.0))
        return window.admit(self.clock())

    def _error(self, what: str, code: str, message: str) -> web.Response:
        return self._json(self.statuses[what], code, message)

    def _json(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        text = json.dumps({"error": {"code": code, "message": message}})
        return self._answer(status, text, headers, "application/json")

    def _answer(
        self,
        status: int,
        text: str,
        headers: Mapping[str, str] | None = None,
        content_type: str = "text/plain",
    ) -> web.Response:
        with self._state:
            self.answers.append((status, text))
        return web.Response(
            status=status, text=text, headers=dict(headers or {}), content_type=content_type
        )


def _card(body: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the Adaptive Card, "") when the message carries a card the post step can render,
    else (None, why the run fails)."""
    try:
        document = json.loads(body)
    except ValueError:
        return None, "InvalidJson"
    if not isinstance(document, dict) or document.get("type") != "message":
        return None, "InvalidTemplate: not a message"
    attachments = document.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return None, "InvalidTemplate: no message attachments"
    first = attachments[0]
    if not isinstance(first, dict) or first.get("contentType") != CARD:
        return None, "InvalidTemplate: attachments[0] is not an Adaptive Card"
    card = first.get("content")
    if not isinstance(card, dict) or card.get("type") != "AdaptiveCard":
        return None, "BadRequest: content is not an AdaptiveCard"
    if not isinstance(card.get("version"), str):
        return None, "BadRequest: the card has no version"
    body_items = card.get("body")
    if not isinstance(body_items, list) or not body_items:
        return None, "BadRequest: the card has no body"
    for item in body_items:
        if not isinstance(item, dict) or item.get("type") != "TextBlock":
            return None, "BadRequest: unsupported card element"
        if not isinstance(item.get("text"), str):
            return None, "BadRequest: TextBlock without text"
    return card, ""
