"""tidings.core: the pure domain (states, model, retry, rate-limit math, filters, text).

Imports only the standard library and other `tidings.core` modules: no I/O, no clock reads,
no randomness without an injected source.
"""
