"""A text file a user named (a settings file, a channels file, an event, a secret): read as
UTF-8, and when it cannot be, one short reason to put beside its name."""

from __future__ import annotations

from pathlib import Path


class Unreadable(Exception):
    """Why the file could not be read: "No such file or directory", "not UTF-8 text"…"""


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from None
