"""The rig every scenario runs on: the PostgreSQL server, the sink, a temporary directory,
the counts, and the baseline runs collected along the way. Imports no scenario."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.database import Postgres
from bench.processes import Sink
from bench.result import Counts


@dataclass
class Rig:
    pg: Postgres
    sink: Sink
    counts: Counts
    tmp: Path
    #: runs of each e2e variant, each paired with a run of raw
    rounds: int
    #: every paired run of raw (deliveries/s), for the table's `raw` row
    raws: list[float] = field(default_factory=list)
    #: keep the history scenario's bulk-built PostgreSQL database between runs
    keep_history: bool = False
