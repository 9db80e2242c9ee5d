"""The error hierarchy every layer raises; the API maps `code`/`status` to its JSON body.

Pure: imports only the standard library.

    TidingsError              code, status (an HTTP-ish hint)
    ├── ValidationError       invalid    422  bad input, names the field
    ├── NotFound              not_found  404  an unknown id
    ├── Conflict              conflict   409  the row is not in a state that allows it
    ├── ConfigError           config     400  settings that cannot work (e.g. C5)
    └── StoreError            store      503  the database is unreachable or failing
        └── SchemaError       schema     503  the database's schema is missing, older or
                                              newer than this tidings' (see `db upgrade`)
"""

from __future__ import annotations


class TidingsError(Exception):
    """Base of every error tidings raises on purpose."""

    code: str = "error"
    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ValidationError(TidingsError):
    code = "invalid"
    status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NotFound(TidingsError):
    code = "not_found"
    status = 404

    def __init__(self, what: str, ident: object) -> None:
        super().__init__(f"{what} {ident} not found")
        self.what = what
        self.ident = ident


class Conflict(TidingsError):
    code = "conflict"
    status = 409


class ConfigError(TidingsError):
    code = "config"
    status = 400


class StoreError(TidingsError):
    code = "store"
    status = 503

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message)
        #: The database's or the driver's own words, when the error came from there.
        self.cause = cause


class SchemaError(StoreError):
    """Raised with the rest of a sentence that begins with the database's URL."""

    code = "schema"
