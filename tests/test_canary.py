"""S2 end to end: channels of every kind hold canary secrets; their receivers echo them back
in failures; the deliveries are resent and sent. Every artefact of the run — API reads with
read and admin tokens, test sends, the CLI's JSON, the admin UI's pages, the server's log
and the database itself — is then searched for the canaries: none may be found."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

import tidings
from tests.channels.harness import CANARY
from tests.channels.table import ROWS, WHSEC, Row
from tests.dispatch.helpers import LOOPBACK, running, settled
from tests.web.conftest import BASE, SAME_ORIGIN
from tidings.server import create_app
from tidings.service import Service

#: A secret beyond the table's own: a webhook URL's query token.
URL_TOKEN = f"qt-{CANARY}-query"
CANARIES = (CANARY, WHSEC, WHSEC.removeprefix("whsec_"), URL_TOKEN)
#: Whose log lines are the server's (the emulators log what they receive, secrets included).
SERVER_LOGGERS = ("tidings", "uvicorn", "fastapi", "starlette", "httpx", "aiohttp", "apprise")


def _config(row: Row, emulator: Any) -> dict[str, Any]:
    config = row.config(emulator)
    if row.kind == "webhook":  # (credentials in the URL would clash with its Authorization)
        config["url"] = f"{config['url']}?token={URL_TOKEN}&page=1"
    return config


def _database(db_url: str) -> str:
    if db_url.startswith("sqlite"):
        path = Path(db_url.removeprefix("sqlite:///"))
        files = path.parent.glob(path.name + "*")
        return "".join(p.read_bytes().decode("latin-1") for p in files)
    with psycopg.connect(db_url) as conn:
        tables = ("channels", "deliveries", "attempts", "events", "inbox_messages")
        return repr([conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables])


async def test_s2_no_canary_in_any_artefact_of_a_full_run(
    hub: tidings.Hub,
    db_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    rows = [row for row in ROWS if row.kind != "apprise" or _has_apprise()]
    artefacts: list[str] = []
    service = Service(hub, allowed_networks=LOOPBACK)
    admin, _ = await service.create_token("admin", ["admin"])
    reader, _ = await service.create_token("reader", ["read"])
    publisher, _ = await service.create_token("publisher", ["publish"])
    transport = httpx.ASGITransport(app=create_app(service))
    with contextlib.ExitStack() as stack:
        emulators = {row.kind: stack.enter_context(row.start()) for row in rows}
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            as_admin = {"Authorization": f"Bearer {admin}"}
            as_reader = {"Authorization": f"Bearer {reader}"}
            ids: dict[str, int] = {}
            for row in rows:
                body = {
                    "name": f"c-{row.kind}",
                    "kind": row.kind,
                    "config": _config(row, emulators[row.kind]),
                    "max_attempts": 1,
                    "timeout_s": 5,
                } | dict(row.fields)
                created = await client.post("/v1/channels", json=body, headers=as_admin)
                assert created.status_code == 201, created.text
                artefacts.append(created.text)
                ids[row.kind] = created.json()["id"]
            for row in rows:  # test sends while the receivers echo the secrets
                row.echo(emulators[row.kind])
                tested = await client.post(f"/v1/channels/{ids[row.kind]}/test", headers=as_admin)
                assert tested.json()["outcome"] != "delivered", (row.kind, tested.text)
                artefacts.append(tested.text)
            for row in rows:  # and again for the first real send
                row.echo(emulators[row.kind])
            published = await client.post(
                "/v1/events",
                json={"kind": "canary.run", "subject": "s", "title": "canary run"},
                headers={"Authorization": f"Bearer {publisher}"},
            )
            assert published.status_code == 201, published.text
            async with running(hub):
                failed = await settled(hub, len(rows))
                assert {d.state.value for d in failed} == {"failed"}, failed
                assert all(d.last_error for d in failed)
                for delivery in failed:
                    resent = await client.post(
                        f"/v1/deliveries/{delivery.id}/resend", headers=as_admin
                    )
                    assert resent.status_code == 200, resent.text
                sent = await _all_sent(hub, len(rows))
            assert len(sent) == len(rows)

            for token in (as_reader, as_admin):
                paths = ["/v1/channels", "/v1/deliveries?page_size=200", "/metrics"]
                paths += [f"/v1/channels/{i}" for i in ids.values()]
                paths += [f"/v1/deliveries/{d.id}" for d in failed]
                paths.append(f"/v1/events/{published.json()['event']['id']}")
                for path in paths:
                    response = await client.get(path, headers=token)
                    assert response.status_code == 200, (path, response.text)
                    artefacts.append(response.text)
            first = await client.get(f"/v1/deliveries/{failed[0].id}", headers=as_admin)
            assert any(a["error"] for a in first.json()["attempts_log"])  # echoes recorded

            login = await client.post("/ui/login", data={"token": admin}, headers=SAME_ORIGIN)
            assert login.status_code == 303
            pages = ["/ui/", "/ui/channels", "/ui/deliveries", "/ui/inbox"]
            pages += [f"/ui/channels/{i}/edit" for i in ids.values()]
            pages += [f"/ui/deliveries/{d.id}" for d in failed]
            for page in pages:
                response = await client.get(page)
                assert response.status_code == 200, (page, response.text[:300])
                artefacts.append(response.text)
            response = await client.post(f"/ui/channels/{ids['webhook']}/test", headers=SAME_ORIGIN)
            artefacts.append(response.text)

    for argv in (
        ["channel", "list", "--json"],
        ["deliveries", "list", "--json"],
        *(["deliveries", "show", str(d.id), "--json"] for d in failed),
    ):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tidings", *argv, "--db", db_url, stdout=PIPE, stderr=PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err
        artefacts += [out.decode(), err.decode()]
    server_log = [
        caplog.handler.format(r) for r in caplog.records if r.name.startswith(SERVER_LOGGERS)
    ]
    assert any("unexpected error" in line or "channel" in line for line in server_log)
    artefacts.extend(server_log)
    artefacts.append(_database(db_url))

    everything = "\n".join(artefacts)
    assert "canary run" in everything  # the artefacts are real
    for canary in CANARIES:
        found = [m.start() for m in re.finditer(re.escape(canary), everything)]
        context = [everything[max(0, i - 80) : i + 40] for i in found[:3]]
        assert not found, (canary, context)
    assert json.dumps(CANARY) not in everything


async def _all_sent(hub: tidings.Hub, count: int) -> list[tidings.Delivery]:
    from tests.dispatch.helpers import eventually

    async def done() -> bool:
        page = await hub.deliveries(page_size=200)
        return sum(v.delivery.state.value == "sent" for v in page.items) >= count

    await eventually(done, 20.0, f"{count} deliveries sent")
    page = await hub.deliveries(page_size=200)
    return [v.delivery for v in page.items if v.delivery.state.value == "sent"]


def _has_apprise() -> bool:
    try:
        import apprise  # noqa: F401
    except ImportError:
        return False
    return True
