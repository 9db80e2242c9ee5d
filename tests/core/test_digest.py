"""Digest segmentation (D5): the largest prefix that fits, found with few renders."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tidings.core.digest import fitting_prefix


@given(count=st.integers(0, 600), threshold=st.integers(0, 700))
def test_finds_the_largest_fitting_prefix(count: int, threshold: int) -> None:
    probes: list[int] = []

    def fits(n: int) -> bool:
        assert 1 <= n <= count  # never asks about an empty or out-of-range prefix
        probes.append(n)
        return n <= threshold

    found = fitting_prefix(count, fits)
    assert found == min(count, threshold)
    # Galloping then bisecting: about 2·log2 of the answer probes, whatever the batch size.
    assert len(probes) <= 2 * math.log2(found + 1) + 3


def test_renders_stay_near_the_answer_in_a_large_batch() -> None:
    rendered = 0

    def fits(n: int) -> bool:
        nonlocal rendered
        rendered += n  # a probe of n entries renders n entries
        return n <= 20

    assert fitting_prefix(500, fits) == 20
    assert rendered <= 4 * 20 * 2  # bisecting from the middle of 500 would render ~500


def test_nothing_fits_when_even_one_entry_is_too_long() -> None:
    assert fitting_prefix(10, lambda n: False) == 0
    assert fitting_prefix(0, lambda n: True) == 0
