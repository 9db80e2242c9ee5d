"""The chaos suite: real processes under overlapping faults, and a ledger that accounts for
every (event, matching channel) at the end. `python -m tests.chaos --help` runs the mix."""
