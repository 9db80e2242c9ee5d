"""A real `tidings serve`: first start, publish over HTTP, delivered to the inbox, SIGTERM."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.api.server import serve


def test_first_start_publish_and_deliver_then_sigterm(tmp_path: Path) -> None:
    served = serve(tmp_path)
    try:
        assert served.token.startswith("tdg_"), served.output()
        auth = {"Authorization": f"Bearer {served.token}"}
        with httpx.Client(base_url=served.base_url, headers=auth, timeout=10) as client:
            channels = client.get("/v1/channels").json()["items"]
            assert [(c["name"], c["kind"]) for c in channels] == [("inbox", "inbox")]
            started = time.monotonic()
            published = client.post(
                "/v1/events", json={"kind": "monitor.down", "subject": "web-1", "title": "down"}
            )
            assert published.status_code == 201
            delivery_id = published.json()["deliveries"][0]["id"]
            while time.monotonic() - started < 5:
                state = client.get(f"/v1/deliveries/{delivery_id}").json()["state"]
                if state == "sent":
                    break
                time.sleep(0.02)
            # W2: far sooner than the 10 s poll interval the server runs with
            assert state == "sent"
            assert time.monotonic() - started < 2.0
            assert client.get("/openapi.json").status_code == 200
    finally:
        code = served.stop()
    assert code == 0, served.output()
    assert "Traceback" not in served.output()


def test_second_start_prints_no_new_token(tmp_path: Path) -> None:
    first = serve(tmp_path)
    assert first.stop() == 0
    second = serve(tmp_path)
    try:
        assert second.output().count("tdg_") == first.output().count("tdg_")
    finally:
        assert second.stop() == 0


def test_refuses_a_lease_too_short_with_one_line(tmp_path: Path) -> None:
    served = serve(tmp_path)
    auth = {"Authorization": f"Bearer {served.token}"}
    httpx.post(
        f"{served.base_url}/v1/channels",
        json={"name": "slow", "kind": "inbox", "timeout_s": 20},
        headers=auth,
    ).raise_for_status()
    assert served.stop() == 0
    with pytest.raises(AssertionError, match="lease of 30 s"):
        serve(tmp_path, TIDINGS_LEASE_S="30")
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
