"""The admin web UI: server-rendered pages under /ui over `tidings.service.Service`.

May import the service, core, auth, the store's value types and the channel registry; never
SQL. Pages are Jinja2 templates (autoescaped), static CSS and JS; no build step.
"""

from tidings.web.app import create_ui

__all__ = ["create_ui"]
