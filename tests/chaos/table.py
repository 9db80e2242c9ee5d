"""The run's table: faults by type with the worst recovery, then the ledger's counts."""

from __future__ import annotations

from typing import Any


def render(summary: dict[str, Any]) -> str:
    book = summary["ledger"]
    lines = [
        f"chaos run: backend {summary['backend']}, seed {summary['seed']}, "
        f"{summary['seconds']} s (settled {summary['settle_s']} s after the last fault)",
        "",
        "| fault | injected | longest from its end until an event published after it arrives |",
        "|---|---:|---:|",
    ]
    for name, count in sorted(summary["faults"].items()):
        worst = summary["recovery_s"].get(name)
        lines.append(f"| {name} | {count} | {'–' if worst is None else f'{worst:.2f} s'} |")
    total = sum(summary["faults"].values())
    lines.append(f"| **all** | **{total}** | |")
    failed = ", ".join(f"{k} {v}" for k, v in sorted(book["failed"].items())) or "none"
    dupes = "; ".join(f"{v} {k}" for k, v in sorted(book["duplicates_by_reason"].items()))
    lines += [
        "",
        "| ledger | |",
        "|---|---:|",
        f"| events | {book['events']:,} |",
        f"| deliveries (expected / stored) | {book['expected']:,} / {book['deliveries']:,} |",
        f"| sent | {book['states'].get('sent', 0):,} |",
        f"| failed by reason | {failed} |",
        f"| requests the receiver saw / took | {book['requests']:,} / {book['taken']:,} |",
        f"| duplicates (each explained) | {book['duplicates']:,}{f' ({dupes})' if dupes else ''} |",
        f"| attempt rows / of them lost leases | {book['attempt_rows']:,} / "
        f"{book['lease_lost_rows']:,} |",
        f"| largest webhook-timestamp skew at arrival | {book['stamp_skew_s']} s |",
        f"| publishes tried again / processes started again after exiting at start | "
        f"{summary.get('publish_failures', 0)} / {summary.get('start_failures', 0)} |",
        f"| **lost** | **{book['lost']}** |",
        f"| violations of I1–I6 | {book['violation_count']} "
        f"{book.get('violations_by_rule') or ''} |",
    ]
    for violation in book["violations"][:20]:
        lines.append(f"  - {violation}")
    for note in summary["notes"][:20]:
        lines.append(f"  - note: {note}")
    return "\n".join(lines)
