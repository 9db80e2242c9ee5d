"""Debian's Chromium driven by Playwright, for the browser tests and the README screenshots.

Missing Chromium fails under CI=true (it must be installed there) and is a loud skip elsewhere.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_chromium() -> None:
    if CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK):
        return
    reason = f"{CHROMIUM} is missing (apt-get install chromium)"
    if IN_CI:
        pytest.fail(f"browser tests need Chromium under CI=true: {reason}", pytrace=False)
    found = shutil.which("chromium") or "no chromium on PATH either"
    pytest.skip(f"!!! BROWSER TESTS SKIPPED: {reason}; {found} !!!")
