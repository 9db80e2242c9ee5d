"""The admin web UI: server-rendered pages under /ui over `tidings.service.Service`.

Calls the service only (never the store, a channel adapter or SQL); may import tidings.core's
value types and tidings.auth, never tidings.api or tidings.cli. Pages are Jinja2 templates
(autoescaped), static CSS and JS; no build step.
"""

from tidings.web.app import create_ui

__all__ = ["create_ui"]
