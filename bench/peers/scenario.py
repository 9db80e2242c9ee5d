"""The "peers" scenario: the e2e webhook workload on other PostgreSQL job queues, so the table
shows their jobs/s beside tidings'. At run time it imports only the standard library and
bench.result; the peers themselves run in bench/peers/.venv, which this module creates and
never lets become a dependency of tidings."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.result import Result

if TYPE_CHECKING:  # the rig brings psycopg and httpx, which nothing here calls directly
    from bench.processes import Sink
    from bench.rig import Rig

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"
STAMP = VENV / "requirements.sha256"
PEERS = ("pgqueuer", "procrastinate")
INSTALL_TIMEOUT_S = 900
# Each script stops itself after 600 s; the margin covers its set-up and the worker's stop.
PEER_TIMEOUT_S = 700


def _fingerprint() -> str:
    """What the venv was built from: requirements.txt, and the interpreter it is tied to."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def _run(command: list[str], timeout_s: float) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} … failed:\n{done.stderr[-2000:]}")


def ensure_venv() -> Path:
    """bench/peers/.venv's python, (re)built from scratch when requirements.txt changed."""
    python = VENV / "bin" / "python"
    fingerprint = _fingerprint()
    if python.exists() and STAMP.exists() and STAMP.read_text().strip() == fingerprint:
        return python
    print("bench: installing the peer queues into bench/peers/.venv …", flush=True)
    # --clear: a changed requirement list gets a clean install, not an upgrade on top.
    _run([sys.executable, "-m", "venv", "--clear", str(VENV)], 120)
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
        INSTALL_TIMEOUT_S,
    )
    STAMP.write_text(fingerprint + "\n")
    return python


def _measure(python: Path, peer: str, db_url: str, sink: Sink, jobs: int) -> dict[str, Any]:
    """Run one peer script on its own database; its one JSON line, or an error."""
    command = [
        str(python),
        str(HERE / f"{peer}_run.py"),
        "--dsn",
        db_url,
        "--sink",
        sink.url("/hook"),
        "--stats",
        sink.url("/stats"),
        "--jobs",
        str(jobs),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PEER_TIMEOUT_S, cwd=HERE)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-1000:] or f"exit {done.returncode}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError("no JSON line on stdout")
    return dict(json.loads(lines[-1]))


def _result(peer: str, report: dict[str, Any]) -> Result:
    notes = {k: v for k, v in report.items() if k not in ("peer", "jobs_per_s")}
    return Result(f"peers/{peer}", report["jobs_per_s"], "deliveries/s", "postgresql", notes=notes)


def _failed(peer: str, error: BaseException) -> Result:
    return Result(f"peers/{peer}", None, "deliveries/s", "postgresql", error=str(error))


def scenario_peers(rig: Rig) -> list[Result]:
    """jobs/s of each peer for counts.e2e webhook jobs, one worker process, 50 in flight."""
    try:
        python = ensure_venv()
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as error:
        return [_failed(peer, RuntimeError(f"bench/peers/.venv: {error}")) for peer in PEERS]
    out: list[Result] = []
    for peer in PEERS:
        print(f"bench: peers/{peer} …", flush=True)
        try:
            with rig.pg.database() as (_name, url):
                report = _measure(python, peer, url, rig.sink, rig.counts.e2e)
                out.append(_result(peer, report))
        except Exception as error:  # one peer failing must not hide the other's figure
            out.append(_failed(peer, error))
    return out
