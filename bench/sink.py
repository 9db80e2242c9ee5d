"""A fast local receiver, run as its own process: `python -m bench.sink` prints its port.

POST /hook      -> 200 "ok", counted (body not parsed)
POST /lat       -> 200 "ok", counted; records time.time() - body.event.data.t (wall clock)
POST /cgi-bin/webhook/send -> WeCom-like: errcode 0, or 40058 when content > 4096 bytes
GET  /stats     -> {"count", "rejected", "latencies"}
GET  /wait?count=N&timeout=S -> {"count"} once N messages arrived (or S seconds passed), so a
                   latency probe waits without polling (polling would load the machine)
POST /reset     -> zero everything
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import web

LIMIT = 4096
state: dict[str, object] = {"count": 0, "rejected": 0, "latencies": []}
arrivals: list[asyncio.Event] = []  # one per waiting /wait request


async def hook(request: web.Request) -> web.Response:
    await request.read()
    state["count"] = int(state["count"]) + 1  # type: ignore[call-overload]
    return web.Response(text="ok")


async def lat(request: web.Request) -> web.Response:
    body = await request.read()
    now = time.time()
    sent_at = json.loads(body)["event"]["data"]["t"]
    state["latencies"].append(now - sent_at)  # type: ignore[attr-defined]
    state["count"] = int(state["count"]) + 1  # type: ignore[call-overload]
    for arrived in arrivals:
        arrived.set()
    return web.Response(text="ok")


async def wait(request: web.Request) -> web.Response:
    wanted = int(request.query["count"])
    deadline = time.monotonic() + float(request.query.get("timeout", "15"))
    arrived = asyncio.Event()
    arrivals.append(arrived)
    try:
        while int(state["count"]) < wanted and time.monotonic() < deadline:  # type: ignore[call-overload]
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
    finally:
        arrivals.remove(arrived)
    return web.json_response({"count": state["count"]})


async def wecom(request: web.Request) -> web.Response:
    body = await request.read()
    try:
        message = json.loads(body)
        content = message[message["msgtype"]]["content"]
    except (ValueError, KeyError, TypeError):
        state["rejected"] = int(state["rejected"]) + 1  # type: ignore[call-overload]
        return web.json_response({"errcode": 40058, "errmsg": "wrong json format"})
    if len(content.encode()) > LIMIT:
        state["rejected"] = int(state["rejected"]) + 1  # type: ignore[call-overload]
        return web.json_response({"errcode": 40058, "errmsg": f"content exceed max length {LIMIT}"})
    state["count"] = int(state["count"]) + 1  # type: ignore[call-overload]
    return web.json_response({"errcode": 0, "errmsg": "ok"})


async def stats(_request: web.Request) -> web.Response:
    return web.json_response(state)


async def reset(_request: web.Request) -> web.Response:
    state.update({"count": 0, "rejected": 0, "latencies": []})
    return web.json_response(state)


async def serve() -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.add_routes(
        [
            web.post("/hook", hook),
            web.post("/lat", lat),
            web.post("/cgi-bin/webhook/send", wecom),
            web.get("/stats", stats),
            web.get("/wait", wait),
            web.post("/reset", reset),
        ]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


if __name__ == "__main__":
    import uvloop

    uvloop.run(serve())
