"""The ledger: for every published event and every channel it matches, check I1–I6 against
the database's rows, the receiver's record and the processes' logs.

`load()` reads a snapshot (the only I/O here); `check()` is a pure function of it and returns
a `Report`: counts, duplicates with their explanations, and violations, so a test asserts
`report.lost == 0 and report.violations == []`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from tests.chaos.receiver import TAKEN
from tidings.core.filters import matches
from tidings.core.message_id import for_digest
from tidings.core.model import Severity

FINAL = {"sent", "failed", "skipped"}
#: Attempt statuses of a send the receiver may have seen (the others: no request made).
SENDS = {"delivered", "retryable", "permanent", "partial", "rate_limited"}
#: Receiver answers that make a failure permanent (redirects are not followed).
PERMANENT_ANSWERS = {"redirect"}
SHOWN_VIOLATIONS = 50


@dataclass
class Snapshot:
    channels: dict[int, dict[str, Any]]
    events: dict[int, dict[str, Any]]
    deliveries: list[dict[str, Any]]
    attempts: dict[int, list[dict[str, Any]]]
    resent: set[int]
    records: list[dict[str, Any]]
    acknowledged: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # API answers read during the run
    canaries: list[str] = field(default_factory=list)
    #: (start, end) wall times of database crashes (`pg_ctl restart -m immediate`): a claim
    #: commits without waiting for its WAL flush, so one made just before a crash is forgotten
    #: and its rows are claimed and sent again with no trace of the first lease (README).
    crashes: list[tuple[float, float]] = field(default_factory=list)


#: How far around a crash a forgotten claim's send may fall (commit → flush → send).
CRASH_MARGIN_S = 3.0


@dataclass
class Report:
    events: int = 0
    expected: int = 0
    deliveries: int = 0
    states: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    taken: int = 0
    lost: int = 0
    duplicates: int = 0
    duplicates_by_reason: dict[str, int] = field(default_factory=dict)
    attempt_rows: int = 0
    lease_lost_rows: int = 0
    #: The largest gap between a request's webhook-timestamp and its arrival (a worker's
    #: clock stamps it: a skewed worker shows here, a receiver would check it).
    stamp_skew_s: float = 0.0
    violations: list[str] = field(default_factory=list)

    def violate(self, rule: str, text: str) -> None:
        self.violations.append(f"{rule}: {text}")

    def summary(self) -> dict[str, Any]:
        doc = dict(self.__dict__)
        doc["violation_count"] = len(self.violations)
        doc["violations_by_rule"] = dict(Counter(v.split(":")[0] for v in self.violations))
        doc["violations"] = self.violations[:SHOWN_VIOLATIONS]
        return doc


def load(
    db_url: str,
    record: Path,
    *,
    acknowledged: Iterable[str] = (),
    logs: Iterable[str] = (),
    answers: Iterable[str] = (),
    canaries: Iterable[str] = (),
    crashes: Iterable[tuple[float, float]] = (),
) -> Snapshot:
    url = db_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:

            def rows(sql: str) -> list[dict[str, Any]]:
                return [dict(r._mapping) for r in conn.execute(text(sql))]

            channels = {c["id"]: c for c in rows("SELECT * FROM channels")}
            events = {
                e["id"]: e
                for e in rows(
                    "SELECT id, kind, severity, labels, tenant, idempotency_key, created_at"
                    " FROM events"
                )
            }
            deliveries = rows("SELECT * FROM deliveries ORDER BY id")
            attempts: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for a in rows("SELECT * FROM attempts ORDER BY id"):
                attempts[a["delivery_id"]].append(a)
            resent = {r["delivery_id"] for r in rows("SELECT delivery_id FROM resends")}
    finally:
        engine.dispose()
    for channel in channels.values():
        for key in ("filter", "config"):
            if isinstance(channel[key], str):
                channel[key] = json.loads(channel[key])
    for event in events.values():
        if isinstance(event["labels"], str):
            event["labels"] = json.loads(event["labels"])
        event["created"] = _epoch(event.pop("created_at"))
    records = []
    if record.exists():
        for line in record.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return Snapshot(
        channels,
        events,
        deliveries,
        dict(attempts),
        resent,
        records,
        list(acknowledged),
        list(logs),
        list(answers),
        list(canaries),
        list(crashes),
    )


def _epoch(value: datetime | str) -> float:
    """A stored time as a Unix time (SQLite keeps naive UTC text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def check(snap: Snapshot) -> Report:
    report = Report(events=len(snap.events), deliveries=len(snap.deliveries))
    by_pair = _deliveries_by_pair(snap, report)
    _check_published(snap, report)
    copies = _copies(snap, by_pair, report)
    for delivery in snap.deliveries:
        _check_delivery(snap, delivery, copies.get(delivery["id"], []), report)
    _check_leaks(snap, report)
    report.states = dict(Counter(d["state"] for d in snap.deliveries))
    report.requests = len(snap.records)
    report.taken = sum(r["answer"] in TAKEN for r in snap.records)
    skews = [abs(int(r["stamp"]) - r["t"]) for r in snap.records if r.get("stamp")]
    report.stamp_skew_s = round(max(skews, default=0.0), 1)
    return report


def _deliveries_by_pair(snap: Snapshot, report: Report) -> dict[tuple[int, int], dict[str, Any]]:
    """I1: exactly one delivery per (event, matching channel), and none for the others."""
    by_pair: dict[tuple[int, int], dict[str, Any]] = {}
    for d in snap.deliveries:
        pair = (d["event_id"], d["channel_id"])
        if pair in by_pair:
            report.violate("I1", f"two deliveries for event {pair[0]}, channel {pair[1]}")
        by_pair[pair] = d
    for event_id, event in snap.events.items():
        for channel_id, channel in snap.channels.items():
            wanted = matches(
                channel["filter"],
                channel["tenant"],
                kind=event["kind"],
                severity=Severity(event["severity"]),
                labels=event["labels"],
                tenant=event["tenant"],
            )
            has = (event_id, channel_id) in by_pair
            report.expected += wanted
            if wanted and not has:
                report.lost += 1
                report.violate("I1", f"event {event_id} has no delivery to {channel['name']}")
            elif has and not wanted:
                report.violate("I1", f"event {event_id} delivered to unmatched {channel['name']}")
    return by_pair


def _check_published(snap: Snapshot, report: Report) -> None:
    """Every publish the publisher saw acknowledged is stored."""
    stored = {e["idempotency_key"] for e in snap.events.values()}
    missing = [key for key in snap.acknowledged if key not in stored]
    if missing:
        report.lost += len(missing)
        report.violate("I1", f"{len(missing)} acknowledged events missing, e.g. {missing[:3]}")


def _copies(
    snap: Snapshot, by_pair: dict[tuple[int, int], dict[str, Any]], report: Report
) -> dict[int, list[dict[str, Any]]]:
    """Each delivery's copies at the receiver; I5 (the webhook-id) and signatures checked."""
    by_id = {d["id"]: d for d in snap.deliveries}
    channel_by_name = {c["name"]: cid for cid, c in snap.channels.items()}
    copies: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in snap.records:
        if record.get("sig") is False:
            report.violate("I1", f"bad signature on {record['id']} at {record['path']}")
        channel_id = channel_by_name.get(record.get("channel") or "")
        if record.get("type") == "event":
            delivery = by_id.get(record.get("delivery") or 0)
            if delivery is None:
                report.violate("I5", f"request for unknown delivery {record.get('delivery')}")
                continue
            expected_id = delivery["message_id"]
            members = [delivery]
        elif record.get("type") == "digest" and channel_id is not None:
            found = [by_pair.get((e, channel_id)) for e in record["events"]]
            members = [d for d in found if d is not None]
            if len(members) != len(found):
                report.violate("I5", f"digest {record['id']} names events without a delivery")
                continue
            expected_id = for_digest([d["message_id"] for d in members])
        else:
            report.violate("I5", f"unreadable request at {record.get('path')}: {record}")
            continue
        if record.get("id") != expected_id:
            report.violate("I5", f"webhook-id {record.get('id')} where {expected_id} was due")
        for delivery in members:
            copies[delivery["id"]].append(record)
    return copies


def _check_delivery(
    snap: Snapshot, d: dict[str, Any], copies: list[dict[str, Any]], report: Report
) -> None:
    rows = snap.attempts.get(d["id"], [])
    channel = snap.channels[d["channel_id"]]
    statuses = Counter(a["status"] for a in rows)
    taken = [c for c in copies if c["answer"] in TAKEN]
    report.attempt_rows += len(rows)
    report.lease_lost_rows += statuses["lease_lost"]
    where = f"delivery {d['id']} ({channel['name']})"
    # I1: a final state, and the one the receiver's record explains.
    if d["state"] not in FINAL:
        report.lost += 1
        report.violate("I1", f"{where} still {d['state']}")
    elif d["state"] == "sent" and not taken:
        report.lost += 1
        report.violate("I1", f"{where} is sent but the receiver never took it")
    elif d["state"] == "failed":
        reason = d["failure"] or "?"
        report.failed[reason] = report.failed.get(reason, 0) + 1
        if not _failure_explained(d, reason, copies, statuses, channel):
            report.violate("I1", f"{where} failed ({reason}) unexplained: {dict(statuses)}")
    elif d["state"] == "skipped":
        reason = d["skip_reason"] or "?"
        report.skipped[reason] = report.skipped.get(reason, 0) + 1
        if not (reason == "channel_disabled" and not channel["enabled"]):
            report.violate("I1", f"{where} skipped ({reason}) with the channel enabled")
    # I2: every further copy the receiver took is explained.
    crashed = _near_crash(snap, copies)
    if len(taken) > 1:
        reason = _duplicate_reason(d, len(taken), statuses, crashed)
        report.duplicates += len(taken) - 1
        report.duplicates_by_reason[reason] = (
            report.duplicates_by_reason.get(reason, 0) + len(taken) - 1
        )
        if reason == "unexplained":
            report.violate("I2", f"{where} taken {len(taken)} times: {dict(statuses)}")
    # I3: within budget, and an audit row for every request the receiver saw.
    if d["attempts"] > channel["max_attempts"]:
        report.violate("I3", f"{where} has attempts={d['attempts']} > {channel['max_attempts']}")
    audited = sum(statuses[s] for s in SENDS) + statuses["lease_lost"] + statuses["expired"]
    if len(copies) > audited and not crashed:
        report.violate("I3", f"{where}: {len(copies)} requests, {audited} attempt rows")
    # I4: nothing after a final outcome, unless an operator resent it. A worker whose lease
    # was lost may still report its send late: its write is fenced and its row kept (C3).
    # Its row may even come first: the outcome's statement draws the attempt row's id, then
    # waits on the row lock of the claim taking the lease over, whose audit row is numbered
    # after it and commits first. (So any worker that lost a lease of this delivery counts
    # as late: a worker that lost one and later leased the row again is not told apart.)
    ended = False
    stale = {a["worker_id"] for a in rows if a["status"] == "lease_lost"}
    for a in rows:
        late_report = a["worker_id"] in stale or a["status"] == "lease_lost" or crashed
        if ended and not late_report and d["id"] not in snap.resent:
            trail = [(b["status"], b["worker_id"]) for b in rows]
            report.violate(
                "I4",
                f"{where}: attempt {a['status']} after a final outcome; "
                f"attempts {trail}, {len(copies)} request(s), {len(taken)} taken",
            )
            break
        # A fenced late report changed nothing: it ends nothing either.
        ended = ended or (a["status"] in ("delivered", "permanent", "expired") and not late_report)


def _failure_explained(
    d: dict[str, Any],
    reason: str,
    copies: list[dict[str, Any]],
    statuses: Counter[str],
    channel: dict[str, Any],
) -> bool:
    if reason == "permanent":
        return any(c["answer"] in PERMANENT_ANSWERS for c in copies)
    if reason == "exhausted":
        return (
            statuses["retryable"] >= channel["max_attempts"]
            or d["lost_leases"] > channel["max_attempts"]
        )
    return False


def _duplicate_reason(d: dict[str, Any], taken: int, statuses: Counter[str], crashed: bool) -> str:
    """Why a receiver took a message more than once."""
    if d["lost_leases"] or statuses["lease_lost"]:
        return "lease lost (crash, stall or partition)"
    if statuses["retryable"] + statuses["partial"] >= taken - 1:
        return "answer lost (the receiver took it, the sender saw a failure)"
    if crashed:
        return "claim forgotten in a database crash"
    return "unexplained"


def _near_crash(snap: Snapshot, copies: list[dict[str, Any]]) -> bool:
    return any(
        start - CRASH_MARGIN_S <= c["t"] <= end + CRASH_MARGIN_S
        for c in copies
        for start, end in snap.crashes
    )


def _check_leaks(snap: Snapshot, report: Report) -> None:
    """I6: no canary in a log line, an API answer or a stored error."""
    stored: list[tuple[str, str]] = []
    for d in snap.deliveries:
        stored.append((f"delivery {d['id']} last_error", d["last_error"] or ""))
    for rows in snap.attempts.values():
        for a in rows:
            text_ = f"{a['error'] or ''} {a['provider_response'] or ''}"
            stored.append((f"attempt {a['id']}", text_))
    places = [
        *stored,
        *((f"log {i}", log) for i, log in enumerate(snap.logs)),
        *((f"API answer {i}", answer) for i, answer in enumerate(snap.answers)),
    ]
    for canary in snap.canaries:
        for where, content in places:
            if canary in content:
                report.violate("I6", f"a secret appears in {where}")
                break
