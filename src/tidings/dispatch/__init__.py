"""The dispatcher: claims due deliveries, sends them through channel adapters and records what
happened. Drives core + store + channels; the app layer (API, CLI) drives it."""

from tidings.dispatch.dispatcher import Dispatcher, DispatcherConfig

__all__ = ["Dispatcher", "DispatcherConfig"]
