"""A small disk of its own for the SQLite file (a tmpfs mount), which a fault fills to the last
byte and frees again: SQLite must answer "database or disk is full" cleanly, keep the file
intact, and go on once space frees. Mounting needs root (or CAP_SYS_ADMIN); `available()`
says whether this machine allows it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

#: The mount's size: room for an hour's chaos run on SQLite, taken from memory only as used.
SIZE = "4g"
FILLER = ".filler"
#: The longest one fill may take (it takes about 2 s on an idle machine).
FILL_LONGEST_S = 15.0


def available() -> str | None:
    """None when a tmpfs can be mounted here; else why not."""
    if os.geteuid() != 0:
        return "mounting a small disk needs root"
    probe = Path(f"/tmp/tidings-chaos-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return f"mount refused: {done.stderr.strip() or done.returncode}"
        subprocess.run(["umount", str(probe)], check=True)
        return None
    except OSError as error:
        return f"mount failed: {error}"
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


class Disk:
    def __init__(self, mountpoint: Path) -> None:
        self.mountpoint = mountpoint
        self.mounted = False

    def mount(self) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(self.mountpoint)],
            check=True,
            capture_output=True,
        )
        self.mounted = True

    def fill(self) -> int:
        """Take every free byte; returns how many were taken. A chunk that does not fit is
        halved (tmpfs undoes a fallocate that runs out of room) down to one page."""
        taken = 0
        chunk = max(self.free_bytes(), 4096)
        # Bounded: on a loaded machine, with the database freeing and taking pages meanwhile,
        # one fill once ran for minutes (and held the API down for as long).
        deadline = time.monotonic() + FILL_LONGEST_S
        fd = os.open(self.mountpoint / FILLER, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while chunk >= 4096 and time.monotonic() < deadline:
                try:
                    os.posix_fallocate(fd, taken, chunk)
                    taken += chunk
                except OSError:
                    chunk //= 2
        finally:
            os.close(fd)
        return taken

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.mountpoint / FILLER).unlink()

    def free_bytes(self) -> int:
        stat = os.statvfs(self.mountpoint)
        return stat.f_bavail * stat.f_frsize

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mountpoint)], check=False)
            self.mounted = False
