"""Outbound safety end to end: private targets and redirects are refused; nothing is sent.

Only loopback ever receives traffic here. 10.0.0.1 and 169.254.169.254 are refused by the
literal-address check, which runs before any connection is attempted; each test first
asserts that check, so a broken guard fails the test before a packet could leave.
"""

from __future__ import annotations

import pytest

import tidings
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Sink
from tidings.channels.netguard import BlockedAddress, check_literal_host
from tidings.core.states import AttemptStatus, Failure, State


@pytest.mark.parametrize("host", ["169.254.169.254", "10.0.0.1"])
async def test_private_and_metadata_targets_are_refused(hub: tidings.Hub, host: str) -> None:
    with pytest.raises(BlockedAddress):
        check_literal_host(host)
    await webhook(hub, f"http://{host}/hook")
    async with running(hub, allowed_networks=()):
        await hub.publish(kind="a.b", subject="s")
        (row,) = await settled(hub, 1)
    assert (row.state, row.failure, row.attempts) == (State.FAILED, Failure.PERMANENT, 1)
    assert host in (row.last_error or "")
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in (row.last_error or "")


async def test_ipv4_mapped_loopback_is_refused_unless_allowed(hub: tidings.Hub, sink: Sink) -> None:
    await webhook(hub, f"http://[::ffff:127.0.0.1]:{sink.port}/canary")
    async with running(hub, allowed_networks=()):
        await hub.publish(kind="a.b", subject="s")
        (row,) = await settled(hub, 1)
    assert (row.state, row.failure) == (State.FAILED, Failure.PERMANENT)
    assert "loopback" in (row.last_error or "")
    assert sink.count() == 0


async def test_loopback_by_name_is_refused_unless_allowed(hub: tidings.Hub, sink: Sink) -> None:
    await webhook(hub, f"http://localhost:{sink.port}/canary")
    async with running(hub, allowed_networks=()):
        await hub.publish(kind="a.b", subject="s")
        (row,) = await settled(hub, 1)
    assert row.state is State.FAILED
    assert sink.count() == 0
    log = (await hub.delivery(row.id)).attempts_log
    assert log[0].status is AttemptStatus.PERMANENT


async def test_redirect_to_loopback_is_not_followed(hub: tidings.Hub, sink: Sink) -> None:
    sink.redirect("/hook", sink.url("/canary"))
    await webhook(hub, sink.url("/hook"))
    async with running(hub):  # loopback allowed: the first hop is reached, the redirect is not
        await hub.publish(kind="a.b", subject="s")
        (row,) = await settled(hub, 1)
    assert (row.state, row.failure) == (State.FAILED, Failure.PERMANENT)
    assert "redirect" in (row.last_error or "").lower()
    assert sink.count("/hook") == 1
    assert sink.count("/canary") == 0
