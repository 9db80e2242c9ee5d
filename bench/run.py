"""The benchmark driver and its command line: starts a sink process and finds PostgreSQL,
runs the scenarios, prints the table and writes bench/results/latest.json. Nothing here
asserts speed. Imports every scenario, and nothing imports it but `python -m bench`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import report
from bench.database import Postgres
from bench.keys import shared_key_file
from bench.peers.scenario import scenario_peers
from bench.processes import ROOT, Sink
from bench.result import Counts, Result
from bench.rig import Rig
from bench.scenarios import (
    channels,
    digest,
    e2e,
    fairness,
    history,
    latency,
    publish,
    raw,
    retention,
    roundtrips,
)

RESULTS = ROOT / "bench" / "results"

#: Every scenario by the name `--only` takes, in the order they run.
SCENARIOS: dict[str, Callable[[Rig], list[Result]]] = {
    "raw": raw.run,
    "e2e": e2e.run,
    "publish": publish.run,
    "channels": channels.run,
    "fairness": fairness.run,
    "latency": latency.run,
    "digest": digest.run,
    "roundtrips": roundtrips.run,
    "retention": retention.run,
    "history": history.run,
    "peers": scenario_peers,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small counts (~1 minute)")
    parser.add_argument("--only", default="", help="comma-separated scenarios to run")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="runs of each e2e variant, each paired with a run of raw (default 3, quick 1)",
    )
    parser.add_argument(
        "--keep-history-data",
        action="store_true",
        help="keep the history scenario's bulk-built PostgreSQL database for the next run",
    )
    parser.add_argument(
        "--history-rows",
        type=int,
        default=None,
        help="deliveries the history scenario builds on PostgreSQL (default 10,000,000)",
    )
    return parser.parse_args(argv)


def run_scenarios(rig: Rig, only: set[str]) -> list[Result]:
    """Each scenario chosen, in order; one that fails becomes an error row and the rest run."""
    results: list[Result] = []
    for name, scenario in SCENARIOS.items():
        if only and name not in only:
            continue
        print(f"bench: {name} …", flush=True)
        t = time.monotonic()
        try:
            results.extend(scenario(rig))
        except Exception as error:
            results.append(Result(name, None, "", "postgresql", error=repr(error)))
        print(f"bench: {name} took {time.monotonic() - t:.1f} s", flush=True)
    return results


@contextlib.contextmanager
def open_rig(
    pg: Postgres, counts: Counts, rounds: int, keep_history: bool = False
) -> Iterator[Rig]:
    """The sink and a temporary directory around a run; both gone, and every database made
    on `pg` dropped, on the way out."""
    sink: Sink | None = None
    try:
        sink = Sink()
        print(f"bench: {pg.where}, PostgreSQL {pg.version}; sink on port {sink.port}", flush=True)
        with (
            tempfile.TemporaryDirectory(prefix="tidings-bench-") as tmpdir,
            shared_key_file(Path(tmpdir)),  # workers read what the bench's Hubs sealed
        ):
            yield Rig(pg, sink, counts, Path(tmpdir), rounds, keep_history=keep_history)
    finally:
        if sink is not None:
            sink.stop()
        pg.drop_all()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = Counts.make(args.quick)
    only = {s for s in args.only.split(",") if s}
    rounds = args.rounds or (1 if args.quick else 3)
    began = time.monotonic()
    pg = Postgres()
    if args.history_rows:
        counts = dataclasses.replace(counts, history_pg=args.history_rows)
    with open_rig(pg, counts, rounds, args.keep_history_data) as rig:
        results = run_scenarios(rig, only)
        raws = rig.raws
    report.ratios_to_raw(results, raws)
    print()
    report.print_table(results)
    machine = report.machine(pg.version, pg.where)
    out = RESULTS / "latest.json"
    report.write_json(out, args.quick, time.monotonic() - began, machine, results)
    print(f"\nwrote {out.relative_to(ROOT)}; machine: {json.dumps(machine)}")
    if args.quick:
        missing = [r.name for r in results if r.figure is None or r.error]
        if missing or not results:
            print(f"bench --quick: no figure for {missing}", file=sys.stderr)
            return 1
    return 0
