"""Channel adapters: one module per kind, the shared HTTP client and classification.

Imports tidings.core; never the store.
"""
