"""tidings.render: the one place message text is produced — sandboxed Jinja2 templates per
markup flavour, escaping every event field for that flavour, with per-channel overrides.
Imports only jinja2, the standard library and tidings.core.
"""

from tidings.render.flavours import Flavour
from tidings.render.renderer import (
    TEMPLATE_NAMES,
    Renderer,
    RenderError,
    default_renderer,
    remembering_entries,
)

__all__ = [
    "TEMPLATE_NAMES",
    "Flavour",
    "RenderError",
    "Renderer",
    "default_renderer",
    "remembering_entries",
]
