"""Benchmarks for tidings: `python -m bench` (full) or `python -m bench --quick`."""
