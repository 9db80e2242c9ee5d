"""`tidings.settle_heap`: start-up objects frozen out of the collector's passes."""

from __future__ import annotations

import subprocess
import sys


def test_settle_heap_freezes_start_up_and_collects_the_young_less_often() -> None:
    # In a process of its own: freezing is for the whole interpreter.
    code = (
        "import gc, tidings; before = gc.get_threshold()[0]; tidings.settle_heap();"
        " print(before, gc.get_threshold()[0], gc.get_freeze_count() > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, frozen = out.stdout.split()
    # The interpreter's own threshold (700 until Python 3.12, 2000 in 3.13), then tidings'.
    assert int(before) < 50_000
    assert (after, frozen) == ("50000", "True")
