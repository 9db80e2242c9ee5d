"""Standard Webhooks signing (https://www.standardwebhooks.com/): `whsec_` secrets and the
`webhook-id`, `webhook-timestamp`, `webhook-signature` headers. Imports only the standard
library and tidings.core.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from typing import Final

from tidings.core.errors import ValidationError

SECRET_PREFIX: Final = "whsec_"
SIGNATURE_VERSION: Final = "v1"
SECRET_BYTES: Final = 24
DEFAULT_TOLERANCE_S: Final = 300
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


def parse_secret(secret: str, where: str = "config.secret") -> bytes:
    """The HMAC key of a `whsec_<base64>` secret (the prefix is optional, as in the spec's
    reference libraries). The message never repeats the secret."""
    encoded = secret.strip().removeprefix(SECRET_PREFIX)
    if not encoded:
        raise ValidationError(where, "is empty; expected whsec_ followed by base64")
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError(
            where, "is not valid base64 after whsec_ (generate one with `tidings secret new`)"
        ) from None
    if not key:
        raise ValidationError(where, "decodes to an empty key")
    return key


def new_secret() -> str:
    """A fresh random secret in the `whsec_` form."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _digest(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return hmac.new(key, signed, hashlib.sha256).digest()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">` under the decoded secret."""
    digest = _digest(parse_secret(secret), msg_id, timestamp, body)
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def headers(
    secrets: str | Sequence[str] | None, msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers; a signature per secret (space-separated, as the spec
    allows during a rotation), none when the channel has no secret."""
    result = {ID_HEADER: msg_id, TIMESTAMP_HEADER: str(timestamp)}
    given = [secrets] if isinstance(secrets, str) else list(secrets or ())
    signatures = [sign(secret, msg_id, timestamp, body) for secret in given if secret]
    if signatures:
        result[SIGNATURE_HEADER] = " ".join(signatures)
    return result


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: int,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """True when `headers` carry a v1 signature of `body` by `secret`, stamped within
    `tolerance_s` of `now` (a receiver's check; used by tests and emulators)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get(ID_HEADER)
    stamp = lowered.get(TIMESTAMP_HEADER, "")
    signatures = lowered.get(SIGNATURE_HEADER)
    if msg_id is None or signatures is None or not stamp.isascii() or not stamp.isdigit():
        return False
    timestamp = int(stamp)
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = sign(secret, msg_id, timestamp, body).encode()
    # The header may list several signatures (key rotation); any v1 match will do.
    return any(
        hmac.compare_digest(candidate.encode(), expected)
        for candidate in signatures.split()
        if candidate.startswith(f"{SIGNATURE_VERSION},")
    )
