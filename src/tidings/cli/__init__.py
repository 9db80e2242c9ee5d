"""The `tidings` command line: thin commands over the library, one-line errors, no tracebacks."""

from tidings.cli import commands, serve
from tidings.cli.app import app, main

__all__ = ["app", "commands", "main", "serve"]
