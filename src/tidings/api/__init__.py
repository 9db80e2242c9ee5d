"""The HTTP API (FastAPI): thin routes over `tidings.service.Service`, JSON errors, bearer auth."""

from tidings.api.app import create_app

__all__ = ["create_app"]
