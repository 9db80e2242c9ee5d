"""What a scenario is given to size its work (`Counts`) and what it hands back (`Result`).
Standard library only: bench/peers imports it too, in tidings' environment or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Counts:
    """How much work each scenario does; `--quick` shrinks every count."""

    raw: int
    e2e: int
    publish_single: int
    publish_batches: int
    latency: int
    digest: int
    #: ended deliveries past their retention that the retention scenarios purge meanwhile
    retention_old: int
    #: deliveries bulk-built for the history scenario, on PostgreSQL and on SQLite
    history_pg: int = 10_000_000
    history_sqlite: int = 1_000_000
    #: repetitions of each history read (p95 of them), and messages per WAL run
    history_reps: int = 20
    history_wal: int = 20_000

    @classmethod
    def make(cls, quick: bool) -> Counts:
        if quick:
            return cls(
                raw=2000,
                e2e=2000,
                publish_single=200,
                publish_batches=3,
                latency=30,
                digest=10_000,
                retention_old=20_000,
                history_pg=20_000,
                history_sqlite=20_000,
                history_reps=3,
                history_wal=500,
            )
        return cls(
            raw=20_000,
            e2e=20_000,
            publish_single=2000,
            publish_batches=20,
            latency=200,
            digest=100_000,
            retention_old=1_000_000,
        )


@dataclass
class Result:
    """One row of the table and one entry of latest.json's `scenarios`. `figure` is None
    when the scenario failed; `error` then says why."""

    name: str
    figure: float | None
    unit: str
    backend: str
    ratio_to_raw: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "figure": self.figure,
            "unit": self.unit,
            "ratio_to_raw": self.ratio_to_raw,
            "backend": self.backend,
            "notes": self.notes,
            "error": self.error,
        }
