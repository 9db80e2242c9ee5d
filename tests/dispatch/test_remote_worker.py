"""W4 with real processes: `serve --no-dispatch` and `worker --remote` with no database access."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.api.server import serve
from tests.sink import Sink

SIGNING_SECRET = "whsec_" + "cmVtb3RlLXdvcmtlci1zaWduaW5nLXNlY3JldA=="


def test_a_remote_worker_delivers_through_the_api(db_url: str, sink: Sink, tmp_path: Path) -> None:
    served = serve(tmp_path, db_url, "--no-dispatch")
    auth = {"Authorization": f"Bearer {served.token}"}
    worker_log = tmp_path / "remote.log"
    worker = None
    try:
        with httpx.Client(base_url=served.base_url, headers=auth, timeout=10) as api:
            api.post(
                "/v1/channels",
                json={
                    "name": "hook",
                    "kind": "webhook",
                    "config": {"url": sink.url("/hook"), "secret": SIGNING_SECRET},
                    "timeout_s": 2,
                    "retry_backoff_s": 0.05,
                },
            ).raise_for_status()
            api.post(
                "/v1/events/batch",
                json={"events": [{"kind": "a.b", "subject": f"s{i}"} for i in range(20)]},
            ).raise_for_status()
            # S5: a worker token, with a ceiling; the admin token is refused a lease.
            created = api.post(
                "/v1/tokens", json={"name": "far", "scopes": ["worker"], "kinds": ["webhook"]}
            )
            assert created.status_code == 201, created.text
            worker_token = created.json()["token"]
            refused = api.post("/v1/worker/lease", json={"worker_id": "admin-as-worker"})
            assert refused.status_code == 403
            time.sleep(0.5)
            assert sink.count() == 0  # the server only serves the API
            env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
            env |= {
                "TIDINGS_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
                "TIDINGS_POLL_INTERVAL_S": "0.2",
                "TIDINGS_DB": "sqlite:////nonexistent/never-opened.db",
            }
            with worker_log.open("wb") as out:
                worker = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tidings",
                        "worker",
                        "--remote",
                        served.base_url,
                        "--token",
                        worker_token,
                        "--id",
                        "far-away",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            sink.wait_for(20, "/hook", timeout_s=30)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                page = api.get("/v1/deliveries", params={"state": "sent", "page_size": 200}).json()
                if page["total"] == 20:
                    break
                time.sleep(0.1)
            assert page["total"] == 20
            detail = api.get(f"/v1/deliveries/{page['items'][0]['id']}").json()
            assert detail["attempts_log"][-1]["worker_id"] == "far-away"
        ids = [r.headers["webhook-id"] for r in sink.requests("/hook")]
        assert len(set(ids)) == 20
        assert all(r.headers["webhook-signature"] for r in sink.requests("/hook"))
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker_log.read_text()
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        assert served.stop() == 0
    assert "Traceback" not in worker_log.read_text()
    # The lease carried the signing secret to the worker, in its answer only: no log has it.
    for text in (worker_log.read_text(), served.output()):
        assert SIGNING_SECRET not in text
        assert SIGNING_SECRET.removeprefix("whsec_") not in text
