"""R1: a purge yields to deliveries. While the dispatcher delivers, the rest after a batch
keeps purging to its share of the time; with nothing to deliver it only pauses briefly."""

from __future__ import annotations

import pytest

import tidings
from tidings.dispatch import retention
from tidings.dispatch.retention import Purger


@pytest.mark.parametrize("batch_s", [0.01, 0.1, 1.0])
async def test_r1_while_delivering_a_purge_takes_at_most_its_share(
    hub: tidings.Hub, batch_s: float
) -> None:
    purger = Purger(hub.store, 30, delivering=lambda: True)
    rest = purger._pause(batch_s)
    assert batch_s / (batch_s + rest) <= retention.SHARE_WHILE_DELIVERING + 1e-9
    assert rest >= retention.BETWEEN_BATCHES_S


async def test_r1_with_nothing_to_deliver_a_purge_only_pauses(hub: tidings.Hub) -> None:
    purger = Purger(hub.store, 30, delivering=lambda: False)
    assert purger._pause(1.0) == retention.BETWEEN_BATCHES_S
