"""The `tidings` command line: thin commands over the service, one-line errors, no tracebacks.

Each module registers its commands on `app`; importing them here makes the command complete.
"""

from tidings.cli import (
    apply,
    channels,
    deliveries,
    publish,
    retention,
    secrets,
    serve,
    tokens,
    worker,
)
from tidings.cli.app import app, main

__all__ = [
    "app",
    "apply",
    "channels",
    "deliveries",
    "main",
    "publish",
    "retention",
    "secrets",
    "serve",
    "tokens",
    "worker",
]
