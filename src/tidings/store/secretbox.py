"""Secrets at rest (S4): AES-256-GCM under a keyring, each ciphertext naming its key.

A ciphertext is `tdg1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`; the key id is derived
from the key itself, so a keyring of several keys (a rotation under way) finds the one each
value needs, and a wrong key is told from a missing one. Keys are 32 random bytes, written as
base64. Imports `cryptography` and the standard library; nothing outside the store handles
ciphertext.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tidings.core import jsontext
from tidings.core.errors import ConfigError

VERSION = "tdg1"
KEY_BYTES = 32
NONCE_BYTES = 12
#: Binds a ciphertext to what it holds: a channel's secret config values.
_CONTEXT = b"tidings channel secrets"


def new_key() -> str:
    """A fresh key, as base64 (what TIDINGS_SECRET_KEY and a key file hold)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")


def parse_key(text: str, where: str) -> bytes:
    """The 32 bytes of a base64 key; a ConfigError naming `where` otherwise (never the key)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where} is not base64 (expected 32 random bytes)") from None
    if len(key) != KEY_BYTES:
        raise ConfigError(f"{where} must be {KEY_BYTES} bytes of base64, not {len(key)}")
    return key


def key_id(key: bytes) -> str:
    """A short public name of a key: shown in errors, stored beside ciphertexts."""
    return hashlib.sha256(b"tidings key id\0" + key).hexdigest()[:12]


def kid_of(ciphertext: str) -> str | None:
    """The key id a ciphertext names; None for a text that is no ciphertext of ours."""
    version, _, rest = ciphertext.partition(".")
    kid, dot, _ = rest.partition(".")
    return kid if version == VERSION and dot else None


class Keyring:
    """The keys a process holds: the primary encrypts, every one decrypts its own values.

    `reload` (a key file's reader) is asked again when a value names a key this ring lacks,
    or when the primary may have changed: a rotation writes the file, and every running
    process picks the new key up at its next read or write.
    """

    def __init__(
        self,
        keys: Sequence[bytes],
        *,
        source: str,
        reload: Callable[[], Sequence[bytes] | None] | None = None,
        file: Path | None = None,
    ) -> None:
        if not keys:
            raise ConfigError(f"{source} holds no key")
        self.source = source
        #: The key file the keys are read from, if any (a rotation writes it).
        self.file = file
        self._reload = reload
        self._set(keys)

    def _set(self, keys: Sequence[bytes]) -> None:
        self._ciphers = {key_id(k): AESGCM(k) for k in keys}
        self.primary = key_id(keys[0])
        self._decrypt_cached.cache_clear()

    @property
    def kids(self) -> tuple[str, ...]:
        """The ids of the keys held, the primary first."""
        return (self.primary, *(k for k in self._ciphers if k != self.primary))

    def refresh(self) -> None:
        """Read the key source again when it can change (a key file); cheap when it did not."""
        if self._reload is not None:
            keys = self._reload()
            if keys:
                self._set(keys)

    def encrypt(self, values: dict[str, Any]) -> str:
        self.refresh()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.primary].encrypt(nonce, jsontext.dumps(values), _CONTEXT)
        body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii")
        return f"{VERSION}.{self.primary}.{body}"

    def decrypt(self, ciphertext: str) -> dict[str, Any]:
        """The values; a ConfigError naming the key when this ring lacks it (or it fails)."""
        kid = kid_of(ciphertext)
        if kid is not None and kid not in self._ciphers:
            self.refresh()
        return dict(self._decrypt_cached(ciphertext))

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one ring per store, for its lifetime
    def _decrypt_cached(self, ciphertext: str) -> dict[str, Any]:
        """Cached: every claim and publish reads its channels, and they rarely change."""
        kid = kid_of(ciphertext)
        cipher = self._ciphers.get(kid or "")
        if cipher is None:
            raise ConfigError(
                f"channel secrets are encrypted under key {kid}, which {self.source} "
                f"does not hold (it holds {', '.join(self.kids)})"
            )
        raw = base64.urlsafe_b64decode(ciphertext.split(".", 2)[2])
        try:
            plain = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _CONTEXT)
        except InvalidTag:
            raise ConfigError(f"channel secrets under key {kid} fail their check") from None
        values: dict[str, Any] = jsontext.loads(plain.decode())
        return values
