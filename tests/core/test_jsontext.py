"""The compact JSON writer: orjson's bytes, and json's for what orjson refuses."""

from __future__ import annotations

import json

from tidings.core import jsontext


def test_compact_utf8_without_escapes() -> None:
    document = {"title": "Dïsk — 99 %", "n": [1, 2.5, None, True], "nested": {"a": "b"}}
    out = jsontext.dumps(document)
    assert out == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(out) == document


def test_integers_beyond_64_bits_are_written_exactly() -> None:
    document = {"big": 2**70, "small": -(2**65), "text": "é"}
    out = jsontext.dumps(document)
    assert json.loads(out) == document
    assert b'"big":1180591620717411303424' in out
    assert "é".encode() in out


def test_reading_keeps_integers_beyond_64_bits_exactly() -> None:
    # orjson alone would read these as floats and lose digits.
    text = '{"big":1180591620717411303424,"small":-36893488147419103232,"f":2.5,"t":"é"}'
    assert jsontext.loads(text) == {
        "big": 2**70,
        "small": -(2**65),
        "f": 2.5,
        "t": "é",
    }
    assert type(jsontext.loads(text)["big"]) is int
    assert jsontext.loads('{"n":[1,2.5,null,true],"s":"x"}') == {
        "n": [1, 2.5, None, True],
        "s": "x",
    }
