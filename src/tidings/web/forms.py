"""Reading urlencoded form posts (the UI's forms send nothing else)."""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import Request

from tidings.core.errors import ValidationError


class Form:
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    @classmethod
    async def read(cls, request: Request) -> Form:
        body = await request.body()
        try:
            text = body.decode()
        except UnicodeDecodeError:
            raise ValidationError("form", "must be UTF-8") from None
        return cls(parse_qsl(text, keep_blank_values=True))

    def get(self, name: str, default: str = "") -> str:
        """The last value sent under `name`, stripped."""
        found = [v for k, v in self._pairs if k == name]
        return found[-1].strip() if found else default

    def has(self, name: str) -> bool:
        return any(k == name for k, _ in self._pairs)

    def as_dict(self) -> dict[str, str]:
        return {k: v.strip() for k, v in self._pairs}
