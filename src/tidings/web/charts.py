"""Bar charts as data for server-rendered inline SVG (presentation attributes, no styles and
no scripts, so the Content-Security-Policy holds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH = 720
HEIGHT = 180
TOP = 12
BOTTOM = 24
LEFT = 36


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int
    label: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    colour: str
    bars: list[Bar]
    ticks: list[Tick]
    peak: int
    total: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    baseline: int = HEIGHT - BOTTOM


def hourly_chart(
    title: str, colour: str, starts: Sequence[datetime], values: Sequence[int]
) -> Chart:
    """One bar per hour; hour labels every 3 hours (UTC)."""
    peak = max([*values, 1])
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT) / max(len(values), 1)
    bars: list[Bar] = []
    ticks: list[Tick] = []
    for i, (start, value) in enumerate(zip(starts, values, strict=True)):
        height = plot_h * value / peak
        x = LEFT + i * slot
        label = f"{start:%H}:00"
        bars.append(
            Bar(
                round(x + 1, 1),
                round(TOP + plot_h - height, 1),
                round(slot - 2, 1),
                round(height, 1),
                value,
                label,
            )
        )
        if i % 3 == 0:
            ticks.append(Tick(round(x + slot / 2, 1), label))
    return Chart(title, colour, bars, ticks, peak, sum(values))
