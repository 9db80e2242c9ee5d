"""What a run reports: the ratios to `raw`, the table on stdout and bench/results/latest.json
(figure, ratio, backend and notes per scenario, plus the machine). Imports bench.result."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

from bench.result import Result

COLUMNS = ("scenario", "figure", "unit", "vs raw", "backend")


def ratios_to_raw(results: list[Result], paired_raws: list[float]) -> None:
    """The `raw` row becomes the median of every baseline run (its own and the ones paired
    with e2e runs); a throughput without a paired ratio (the peers) is taken against it."""
    raw = _raw_row(results, paired_raws)
    for r in results:
        if raw and r.unit == "deliveries/s" and r.figure is not None and r.ratio_to_raw is None:
            r.ratio_to_raw = r.figure / raw


def _raw_row(results: list[Result], paired: list[float]) -> float | None:
    row = next((r for r in results if r.name == "raw" and r.figure), None)
    if row is None or row.figure is None:
        return None
    runs = [row.figure, *paired]
    row.figure = statistics.median(runs)
    row.notes["runs"] = [round(x) for x in runs]
    return row.figure


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


def table_rows(results: list[Result]) -> list[tuple[str, str, str, str, str]]:
    rows = [COLUMNS]
    for r in results:
        ratio = f"{r.ratio_to_raw:.2f}x" if r.ratio_to_raw is not None else ""
        figure = _fmt(r.figure) if r.error is None else f"ERROR: {r.error[:60]}"
        rows.append((r.name, figure, r.unit, ratio, r.backend))
    return rows


def print_table(results: list[Result]) -> None:
    """Columns padded to their widest cell, figures right-aligned, a rule under the head."""
    rows = table_rows(results)
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for k, row in enumerate(rows):
        print(
            "  ".join(
                cell.ljust(widths[i]) if i != 1 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            )
        )
        if k == 0:
            print("  ".join("-" * w for w in widths))


def machine(pg_version: str | None, pg_where: str | None) -> dict[str, Any]:
    """What the figures were measured on."""
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "postgresql": pg_version,
        "postgresql_from": pg_where,
        "platform": platform.platform(),
    }


def write_json(
    path: Path, quick: bool, wall_s: float, machine: dict[str, Any], results: list[Result]
) -> None:
    doc = {
        "quick": quick,
        "wall_s": round(wall_s, 1),
        "machine": machine,
        "scenarios": [r.as_json() for r in results],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
