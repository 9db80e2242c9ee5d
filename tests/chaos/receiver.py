"""A webhook receiver process that records every request it gets, and answers as told.

Run as `python -m tests.chaos.receiver --port P --record FILE --secrets JSON`; it prints
`listening on P` once it accepts. Each request is appended to FILE as one JSON line before
it is answered (path, webhook-id, whether the signature is valid, a hash of the body, the
delivery and event ids it carries, the wall time, and how it was answered), so a record
survives the receiver being killed. `POST /_control {"mode": M, "path": P}` changes how
requests (to P, or to every path) are answered from then on; see MODES.

With `--tls-port` and `--tls-dir` (see tests/chaos/tls.py) it also answers over TLS, with a
certificate from a CA the dispatchers trust. The TLS modes (`tls_untrusted`,
`tls_wrong_name`) put another certificate in its place for new handshakes and drop requests
that come on a connection opened before, so every send over TLS fails until `ok`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import ssl
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from tidings.channels import signing

#: How the receiver answers: the fault each mode plays.
MODES = (
    "ok",  # 200
    "error",  # 500, the body echoing a header the sender keeps secret (must be scrubbed)
    "throttle",  # 429 with Retry-After: 1
    "hang",  # never answers (the sender's timeout ends it)
    "reset",  # the connection is dropped without an answer
    "drip",  # 200, its body written slowly in small pieces
    "huge",  # 500 with a 2 MiB body
    "redirect",  # 302 elsewhere (not followed: a permanent failure)
    "tls_untrusted",  # TLS port: a certificate from no CA the sender trusts
    "tls_wrong_name",  # TLS port: a certificate from the trusted CA, for another name
)
#: Modes whose answer means the message was taken.
TAKEN = frozenset({"ok", "drip"})
CANARY_HEADER = "x-canary"


class Receiver:
    def __init__(
        self, record_path: str, secrets: dict[str, str], tls_dir: Path | None = None
    ) -> None:
        self.secrets = secrets
        self.mode = "ok"
        self.by_path: dict[str, str] = {}
        self.tls_dir = tls_dir
        self.tls_mode = "ok"
        self.tls = None if tls_dir is None else ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._present("good")
        # Unbuffered appends: a line is in the kernel before the answer, so kill -9 keeps it.
        self.fd = os.open(record_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    async def control(self, request: web.Request) -> web.Response:
        order = await request.json()
        mode = order.get("mode", "ok")
        if mode not in MODES:
            return web.json_response({"error": f"unknown mode {mode!r}"}, status=400)
        path = order.get("path")
        if mode.startswith("tls_") or (mode == "ok" and not path):
            self.tls_mode = mode
            self._present("good" if mode == "ok" else mode.removeprefix("tls_"))
            if mode != "ok":
                return web.json_response({"mode": mode, "path": None})
        if path:
            self.by_path[path] = mode
        else:
            self.mode = mode
            self.by_path.clear()
        return web.json_response({"mode": mode, "path": path})

    def _present(self, name: str) -> None:
        """Handshakes from now on show this certificate (open connections keep theirs)."""
        if self.tls is not None and self.tls_dir is not None:
            self.tls.load_cert_chain(self.tls_dir / f"{name}.pem", self.tls_dir / f"{name}.key")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        mode = self.by_path.get(request.path, self.mode)
        if request.secure and self.tls_mode != "ok":
            mode = self.tls_mode  # a connection from before the fault: dropped below
        self._record(request, body, mode)
        return await _answer(request, mode)

    def _record(self, request: web.Request, body: bytes, mode: str) -> None:
        now = time.time()
        secret = self.secrets.get(request.path)
        headers = dict(request.headers)
        line: dict[str, Any] = {
            "t": now,
            "path": request.path,
            "id": request.headers.get(signing.ID_HEADER),
            "sig": None
            if secret is None
            else signing.verify(secret, headers, body, now=int(now), tolerance_s=10**9),
            "stamp": request.headers.get(signing.TIMESTAMP_HEADER),
            "sha": hashlib.sha256(body).hexdigest()[:16],
            "answer": mode,
        }
        line.update(_carried(body))
        os.write(self.fd, (json.dumps(line) + "\n").encode())


def _carried(body: bytes) -> dict[str, Any]:
    """The delivery and event ids a webhook body carries (a realtime event or a digest)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return {"type": "unreadable"}
    if doc.get("type") == "digest":
        return {
            "type": "digest",
            "channel": doc.get("channel"),
            "events": [e["id"] for e in doc.get("events", [])],
        }
    return {
        "type": doc.get("type"),
        "channel": doc.get("channel"),
        "delivery": doc.get("delivery_id"),
        "events": [doc["event"]["id"]] if "event" in doc else [],
    }


async def _answer(request: web.Request, mode: str) -> web.StreamResponse:
    if mode == "error":
        echoed = request.headers.get(CANARY_HEADER, "")
        return web.Response(status=500, text=f"internal error; request had {echoed}")
    if mode == "throttle":
        return web.Response(status=429, text="slow down", headers={"Retry-After": "1"})
    if mode == "hang":
        await asyncio.sleep(3600)
    if mode == "reset" or mode.startswith("tls_"):
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=599)
    if mode == "drip":
        response = web.StreamResponse(status=200)
        response.content_length = 20
        await response.prepare(request)
        for _ in range(10):
            await response.write(b"ok")
            await asyncio.sleep(0.03)
        await response.write_eof()
        return response
    if mode == "huge":
        return web.Response(status=500, body=b"x" * (2 * 1024 * 1024))
    if mode == "redirect":
        return web.Response(status=302, headers={"Location": "http://127.0.0.1:9/elsewhere"})
    return web.Response(status=200, text="ok")


async def main(
    port: int,
    record: str,
    secrets: dict[str, str],
    tls_port: int | None = None,
    tls_dir: Path | None = None,
) -> None:
    receiver = Receiver(record, secrets, tls_dir if tls_port else None)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/_control", receiver.control)
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True, backlog=1024)
    await site.start()
    if tls_port and receiver.tls is not None:
        secure = web.TCPSite(
            runner,
            "127.0.0.1",
            tls_port,
            reuse_address=True,
            backlog=1024,
            ssl_context=receiver.tls,
        )
        await secure.start()
    print(f"listening on {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--secrets", default="{}", help="JSON: path -> whsec_ secret")
    parser.add_argument("--tls-port", type=int, default=None)
    parser.add_argument("--tls-dir", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.record, json.loads(args.secrets), args.tls_port, args.tls_dir))
