"""A fast local receiver, run as its own process: `python -m bench.sink` prints its port.

POST /hook      -> 200 "ok", counted (body not parsed)
POST /lat       -> 200 "ok", counted; records time.time() - body.event.data.t (wall clock)
POST /cgi-bin/webhook/send -> WeCom-like: errcode 0, or 40058 when content > 4096 bytes
GET  /stats     -> {"count", "rejected", "latencies"}
GET  /wait?count=N&timeout=S -> {"count"} once N messages arrived (or S seconds passed), so a
                   probe waits without polling (polling would load the processes measured)
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
#: (count awaited, its future), one per waiting /wait request; woken once, when reached.
waiters: list[tuple[int, asyncio.Future[None]]] = []


def counted() -> None:
    state["count"] = count = int(state["count"]) + 1  # type: ignore[call-overload]
    for wanted, future in waiters:
        if count >= wanted and not future.done():
            future.set_result(None)


async def hook(request: web.Request) -> web.Response:
    await request.read()
    counted()
    return web.Response(text="ok")


async def lat(request: web.Request) -> web.Response:
    body = await request.read()
    now = time.time()
    sent_at = json.loads(body)["event"]["data"]["t"]
    state["latencies"].append(now - sent_at)  # type: ignore[attr-defined]
    counted()
    return web.Response(text="ok")


async def wait(request: web.Request) -> web.Response:
    wanted = int(request.query["count"])
    timeout = float(request.query.get("timeout", "15"))
    if int(state["count"]) < wanted:  # type: ignore[call-overload]
        waiter = (wanted, asyncio.get_running_loop().create_future())
        waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter[1], timeout)
        except TimeoutError:
            pass
        finally:
            waiters.remove(waiter)
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
    counted()
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
