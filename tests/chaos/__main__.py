"""`python -m tests.chaos`: the full mix of faults at random, with a printed seed; prints the
table and writes chaos/results/latest.json. Exits non-zero when anything was lost or a rule
of the ledger was broken."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from tests.chaos import disk, table
from tests.chaos.faults import FAULTS
from tests.chaos.scenario import Plan, Result, run

RESULTS = Path(__file__).resolve().parents[2] / "chaos" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--minutes", type=float, default=None, help="default: while publishing")
    parser.add_argument("--backend", choices=("postgresql", "sqlite", "both"), default="both")
    parser.add_argument("--events-per-s", type=float, default=100.0)
    parser.add_argument("--lanes", type=int, default=2, help="faults at once")
    parser.add_argument(
        "--hold",
        type=float,
        nargs=2,
        default=(1.0, 4.0),
        metavar=("MIN", "MAX"),
        help="how long a fault lasts, drawn in this range (seconds)",
    )
    parser.add_argument(
        "--gap",
        type=float,
        nargs=2,
        default=(0.5, 2.0),
        metavar=("MIN", "MAX"),
        help="the pause between two faults of one lane (seconds)",
    )
    parser.add_argument("--fault", action="append", choices=sorted(FAULTS), default=[])
    parser.add_argument(
        "--alone",
        type=int,
        default=0,
        metavar="N",
        help="instead of a mix: each fault alone, in turn, N rounds (recovery without overlap)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.json")
    parser.add_argument(
        "--keep", action="store_true", help="keep a failed run's files (database, logs, record)"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"chaos: seed {seed}", flush=True)
    backends = ["postgresql", "sqlite"] if args.backend == "both" else [args.backend]
    no_disk = disk.available()
    if no_disk is not None and "sqlite" in backends:
        print(f"chaos: WARNING: no full-disk fault on SQLite: {no_disk}", flush=True)
        args.fault = args.fault or [n for n in sorted(FAULTS) if n != "disk_full"]
        args.fault = [n for n in args.fault if n != "disk_full"]
    summaries = []
    ok = True
    for backend in backends:
        workdir = tempfile.mkdtemp(prefix=f"tidings-chaos-{backend}-")
        result: Result | None = None
        try:
            names = tuple(f for f in args.fault if backend in FAULTS[f].backends)
            every = names or tuple(n for n in sorted(FAULTS) if backend in FAULTS[n].backends)
            plan = Plan(
                backend=backend,
                seed=seed,
                events=args.events,
                workdir=Path(workdir),
                faults=names,
                sequence=every * args.alone,
                minutes=args.minutes,
                events_per_s=args.events_per_s,
                lanes=args.lanes,
                hold_s=tuple(args.hold),
                fault_gap_s=tuple(args.gap),
                progress_every_s=30.0,
                keep=args.keep,
            )
            result = asyncio.run(run(plan))
        finally:
            if args.keep and (result is None or not result.ok):
                print(f"chaos: kept {workdir}", flush=True)
            else:
                shutil.rmtree(workdir, ignore_errors=True)
        summary = result.summary()
        summaries.append(summary)
        print(table.render(summary), flush=True)
        print(flush=True)
        ok = ok and result.ok
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seed": seed, "runs": summaries}, indent=2, default=str))
    print(f"chaos: wrote {args.out}; seed {seed}; {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
