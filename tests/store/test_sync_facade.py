"""The synchronous facade, and publishing inside a caller's own sync transaction (E1)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

import tidings
from tests.api.test_channel_rules import WECOM_URL
from tidings.core.errors import ValidationError
from tidings.core.states import State


def _sync_url(db_url: str) -> str:
    if db_url.startswith("sqlite"):
        return db_url
    return db_url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def sync_hub(db_url: str):  # type: ignore[no-untyped-def]
    with tidings.SyncHub(db_url) as hub:
        yield hub


def test_sync_hub_publishes_and_lists(sync_hub: tidings.SyncHub) -> None:
    ch = sync_hub.channels.create(name="ops", kind="inbox")
    result = sync_hub.publish(kind="monitor.down", subject="monitor:7", severity="high")
    assert result.created
    assert [d.channel_id for d in result.deliveries] == [ch.id]
    page = sync_hub.deliveries()
    assert page.total == 1
    assert page.items[0].delivery.state is State.PENDING
    assert sync_hub.get_event(result.event.id).event == result.event


def test_publish_in_callers_sync_transaction_commits_and_rolls_back_with_it(
    sync_hub: tidings.SyncHub, db_url: str
) -> None:
    sync_hub.channels.create(name="ops", kind="inbox")
    engine = create_engine(_sync_url(db_url))
    try:
        with engine.connect() as conn:
            with conn.begin() as tx:
                conn.execute(text("CREATE TABLE IF NOT EXISTS orders (id INTEGER)"))
                conn.execute(text("INSERT INTO orders VALUES (1)"))
                sync_hub.publish(kind="order.created", subject="order:1", conn=conn)
                tx.rollback()
            with conn.begin():
                sync_hub.publish(kind="order.created", subject="order:2", conn=conn)
        page = sync_hub.deliveries()
        assert [v.subject for v in page.items] == ["order:2"]
        assert page.total == 1
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS orders"))
        engine.dispose()


def test_the_sync_facade_checks_the_same_way(db_url: str) -> None:
    with tidings.SyncHub(db_url) as hub:
        wecom = hub.channels.create(name="sec", kind="wecom", config={"webhook_url": WECOM_URL})
        assert wecom.rate_per_min == 18
        with pytest.raises(ValidationError, match=r"config\.webhook_url"):
            hub.channels.create(name="bad", kind="wecom", config={"webhook_url": "ftp://x"})
        assert [c.name for c in hub.channels.list()] == ["sec"]
