"""The ledger catches what it is there to catch: each rule broken on a hand-made snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.ledger import Snapshot, check
from tidings.core.message_id import for_digest

CANARY = "canary-header-0123456789abcdef"


def _snapshot() -> Snapshot:
    """Two events, a realtime channel taking both and a digest channel taking the prod one;
    everything sent once, as it should be."""
    channels = {
        1: _channel(1, "rt", {}),
        2: _channel(2, "dg", {"labels": {"env": "prod"}}, mode="digest"),
    }
    events = {
        10: _event(10, "prod"),
        11: _event(11, "staging"),
    }
    deliveries = [
        _delivery(100, 10, 1),
        _delivery(101, 11, 1),
        _delivery(102, 10, 2, batch_id=102),
    ]
    attempts = {d["id"]: [_attempt(d["id"], "delivered")] for d in deliveries}
    records = [
        _record("rt", "msg_100", delivery=100, events=[10]),
        _record("rt", "msg_101", delivery=101, events=[11]),
        _record("dg", for_digest(["msg_102"]), events=[10], type="digest"),
    ]
    return Snapshot(
        channels,
        events,
        deliveries,
        attempts,
        set(),
        records,
        acknowledged=["k10", "k11"],
        logs=["all quiet"],
        canaries=[CANARY],
    )


def _channel(cid: int, name: str, filter: dict[str, Any], mode: str = "realtime") -> dict[str, Any]:
    return {
        "id": cid,
        "name": name,
        "filter": filter,
        "tenant": None,
        "mode": mode,
        "max_attempts": 3,
        "enabled": True,
    }


def _event(eid: int, env: str) -> dict[str, Any]:
    return {
        "id": eid,
        "kind": "a.b",
        "severity": "high",
        "labels": {"env": env},
        "tenant": None,
        "idempotency_key": f"k{eid}",
    }


def _delivery(did: int, event_id: int, channel_id: int, **fields: Any) -> dict[str, Any]:
    row = {
        "id": did,
        "event_id": event_id,
        "channel_id": channel_id,
        "state": "sent",
        "attempts": 1,
        "failure": None,
        "skip_reason": None,
        "last_error": None,
        "lost_leases": 0,
        "message_id": f"msg_{did}",
        "batch_id": None,
    }
    return row | fields


def _attempt(delivery_id: int, status: str, aid: int = 0) -> dict[str, Any]:
    return {
        "id": aid or delivery_id * 10,
        "delivery_id": delivery_id,
        "status": status,
        "worker_id": "w1",
        "error": None,
        "provider_response": None,
    }


def _record(channel: str, msg_id: str, **fields: Any) -> dict[str, Any]:
    doc = {"t": 1.0, "path": f"/{channel}", "id": msg_id, "sig": True, "answer": "ok"}
    return doc | {"channel": channel, "type": "event"} | fields


def test_a_clean_run_has_nothing_to_say() -> None:
    report = check(_snapshot())
    assert report.violations == []
    assert (report.lost, report.duplicates, report.expected) == (0, 0, 3)
    assert report.states == {"sent": 3}


def test_a_missing_delivery_is_lost() -> None:
    snap = _snapshot()
    snap.deliveries = [d for d in snap.deliveries if d["id"] != 101]
    snap.records = [r for r in snap.records if r.get("delivery") != 101]
    report = check(snap)
    assert report.lost == 1
    assert any("event 11 has no delivery to rt" in v for v in report.violations)


def test_an_acknowledged_event_missing_is_lost() -> None:
    snap = _snapshot()
    snap.acknowledged.append("k12")
    assert check(snap).lost == 1


def test_sent_without_the_receiver_taking_it_is_lost() -> None:
    snap = _snapshot()
    snap.records[0]["answer"] = "error"
    report = check(snap)
    assert report.lost == 1
    assert any("never took it" in v for v in report.violations)


def test_a_row_left_sending_is_lost() -> None:
    snap = _snapshot()
    snap.deliveries[0]["state"] = "sending"
    assert check(snap).lost == 1


def test_a_duplicate_needs_a_lost_lease_or_a_lost_answer() -> None:
    snap = _snapshot()
    snap.records.append(dict(snap.records[0]))
    report = check(snap)
    assert report.duplicates == 1
    assert any(v.startswith("I2") for v in report.violations)
    snap.deliveries[0]["lost_leases"] = 1
    snap.attempts[100].insert(0, _attempt(100, "lease_lost", aid=1))
    report = check(snap)
    assert report.violations == []
    assert report.duplicates_by_reason == {"lease lost (crash, stall or partition)": 1}


@pytest.mark.parametrize("where", ["record", "digest"])
def test_a_webhook_id_that_changed_breaks_i5(where: str) -> None:
    snap = _snapshot()
    snap.records[0 if where == "record" else 2]["id"] = "msg_other"
    assert any(v.startswith("I5") for v in check(snap).violations)


def test_a_bad_signature_is_reported() -> None:
    snap = _snapshot()
    snap.records[1]["sig"] = False
    assert any("bad signature" in v for v in check(snap).violations)


def test_attempts_over_budget_and_requests_without_a_row_break_i3() -> None:
    snap = _snapshot()
    snap.deliveries[0]["attempts"] = 4
    snap.records.append(dict(snap.records[1], answer="error"))
    violations = [v for v in check(snap).violations if v.startswith("I3")]
    assert len(violations) == 2


def test_an_attempt_after_the_final_outcome_breaks_i4_unless_resent() -> None:
    snap = _snapshot()
    snap.attempts[100].append(_attempt(100, "retryable", aid=2000))
    snap.records.append(dict(snap.records[0], answer="error"))
    assert any(v.startswith("I4") for v in check(snap).violations)
    snap.resent.add(100)
    assert not any(v.startswith("I4") for v in check(snap).violations)


def test_a_late_report_of_a_lost_lease_is_no_i4_violation() -> None:
    """The stalled worker's send is reported after another worker's outcome: fenced, kept."""
    snap = _snapshot()
    snap.deliveries[0]["lost_leases"] = 1
    stalled = dict(_attempt(100, "lease_lost", aid=1), worker_id="stalled")
    late = dict(_attempt(100, "retryable", aid=2000), worker_id="stalled")
    snap.attempts[100] = [stalled, _attempt(100, "delivered", aid=2), late]
    snap.records.append(dict(snap.records[0], answer="hang"))
    assert check(snap).violations == []
    # Recorded before the new owner's outcome: the fenced report ends nothing.
    snap.attempts[100] = [stalled, dict(late, status="delivered"), _attempt(100, "delivered")]
    snap.records[-1]["answer"] = "ok"
    assert check(snap).violations == []


def test_a_late_report_numbered_before_the_lost_lease_is_no_i4_violation() -> None:
    """The fenced outcome drew its attempt row's id before it waited on the row lock of the
    claim that took the lease over: its row comes first, the audit of the lost lease next."""
    snap = _snapshot()
    snap.deliveries[0]["lost_leases"] = 1
    late = dict(_attempt(100, "delivered", aid=1), worker_id="stalled")
    lost = dict(_attempt(100, "lease_lost", aid=2), worker_id="stalled")
    snap.attempts[100] = [late, lost, _attempt(100, "delivered", aid=3)]
    snap.records.append(dict(snap.records[0]))
    assert check(snap).violations == []
    # Another worker's outcome after a final one is still caught.
    snap.attempts[100].append(dict(_attempt(100, "delivered", aid=4), worker_id="other"))
    snap.records.append(dict(snap.records[0]))
    assert any(v.startswith("I4") for v in check(snap).violations)


def test_a_claim_forgotten_in_a_database_crash_explains_a_second_send() -> None:
    """Claims commit without waiting for the WAL flush: one made just before a crash is
    forgotten, its rows claimed again, and the first worker's late row kept (C3)."""
    snap = _snapshot()
    snap.attempts[100] = [
        dict(_attempt(100, "delivered", aid=1), worker_id="w1"),
        dict(_attempt(100, "delivered", aid=2), worker_id="w2"),
    ]
    snap.records.append(dict(snap.records[0], t=30.0))
    assert any(v.startswith("I4") for v in check(snap).violations)
    snap.crashes.append((29.0, 31.0))
    report = check(snap)
    assert report.violations == []
    assert report.duplicates_by_reason == {"claim forgotten in a database crash": 1}


def test_a_failure_the_receiver_does_not_explain_is_reported() -> None:
    snap = _snapshot()
    row = snap.deliveries[1]
    row.update(state="failed", failure="exhausted", attempts=3)
    snap.records[1]["answer"] = "error"
    snap.attempts[101] = [_attempt(101, "retryable")]
    report = check(snap)
    assert report.failed == {"exhausted": 1}
    assert any("unexplained" in v for v in report.violations)
    snap.attempts[101] = [_attempt(101, "retryable", aid=i + 1) for i in range(3)]
    snap.records += [dict(snap.records[1]) for _ in range(2)]
    assert check(snap).violations == []


@pytest.mark.parametrize("place", ["log", "answer", "last_error", "provider_response"])
def test_a_secret_anywhere_breaks_i6(place: str) -> None:
    snap = _snapshot()
    leak = f"oops {CANARY}"
    if place == "log":
        snap.logs.append(leak)
    elif place == "answer":
        snap.answers.append(leak)
    elif place == "last_error":
        snap.deliveries[0]["last_error"] = leak
    else:
        snap.attempts[100][0]["provider_response"] = leak
    assert any(v.startswith("I6") for v in check(snap).violations)
