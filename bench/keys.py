"""One secret key file for a scenario and the processes it starts: the first Hub of a
database records its key, and a worker must read what that Hub sealed (S4). Set through the
environment, which `tidings worker` processes inherit. Imports tidings only, on first use."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

ENV = "TIDINGS_SECRET_KEY_FILE"


@contextlib.contextmanager
def shared_key_file(directory: Path) -> Iterator[Path]:
    """A key file in `directory` (made once) named by the environment for the block."""
    from tidings.store.keys import create_key_file  # on use: see bench/scenarios/raw.py

    path = directory / "tidings.key"
    create_key_file(path)  # False when an earlier scenario made it
    before = os.environ.get(ENV)
    os.environ[ENV] = str(path)
    try:
        yield path
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before
