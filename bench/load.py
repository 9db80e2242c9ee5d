"""The HTTP ingest load generator: `concurrency` keep-alive connections POST single events to
`/v1/events` for a fixed time, in a process of its own; answers/s is the figure. `wrk` when it
is installed (its C client costs the 2-core machine least), else an aiohttp client:

    python -m bench.load BASE_URL SECONDS CONCURRENCY [TOKEN]

prints answers/s. Any answer but 200/201 fails the run: a fast error is not throughput.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.processes import ROOT
from bench.workload import event

PATH = "/v1/events"


def generator() -> str:
    """Which client `rate` uses: `wrk`, or `aiohttp` where wrk is not installed."""
    return "wrk" if shutil.which("wrk") else "aiohttp"


def rate(base: str, seconds: float, concurrency: int, token: str | None = None) -> float:
    """Answers/s of `concurrency` connections publishing for `seconds`."""
    if generator() == "wrk":
        return _wrk(base, seconds, concurrency, token)
    args = [sys.executable, "-m", "bench.load", base, str(seconds), str(concurrency)]
    done = subprocess.run(
        [*args, token] if token else args, capture_output=True, text=True, check=True, cwd=ROOT
    )
    return float(done.stdout.strip().splitlines()[-1])


def _lua(token: str | None) -> str:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(json.dumps(event(0)))}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def _wrk(base: str, seconds: float, concurrency: int, token: str | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "publish.lua"
        script.write_text(_lua(token))
        threads = min(2, concurrency)
        command = ["wrk", f"-t{threads}", f"-c{concurrency}", f"-d{seconds:g}s", "-s", str(script)]
        out = subprocess.run(
            [*command, base + PATH], capture_output=True, text=True, check=True
        ).stdout
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests:\n{out}")
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise RuntimeError(f"wrk printed no rate:\n{out}")
    return float(found.group(1))


async def _aiohttp(base: str, seconds: float, concurrency: int, token: str | None) -> float:
    import aiohttp

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps(event(0)).encode()
    answered = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base, headers=headers, connector=connector) as session:
        deadline = time.monotonic() + seconds

        async def lane() -> None:
            nonlocal answered
            while time.monotonic() < deadline:
                async with session.post(PATH, data=body) as answer:
                    await answer.read()
                    if answer.status not in (200, 201):
                        raise RuntimeError(f"publish answered {answer.status}")
                answered += 1

        started = time.monotonic()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        return answered / (time.monotonic() - started)


def main(argv: list[str]) -> int:
    base, seconds, concurrency = argv[0], float(argv[1]), int(argv[2])
    token = argv[3] if len(argv) > 3 else None
    print(f"{asyncio.run(_aiohttp(base, seconds, concurrency, token)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
