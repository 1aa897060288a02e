"""The geometry of a server-rendered SVG bar chart; pure Python.

Horizontal bars in groups (one group per metric, one bar per mode), each bar named by
its mode on the left and its value on the right: read at a phone's width as well as
at a desk's, with no legend to match colours against. The template
(templates/retrieval/evaluations/partials/chart.svg.html) draws what this computes;
the numbers are in the table beside it too."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 420  # narrow enough that a phone shows its text near full size
LABEL_W = 104  # the modes' names
VALUE_W = 70  # a value written after its bar
BAR_H = 18
BAR_GAP = 4
HEAD_H = 22  # a group's name above its bars
GROUP_GAP = 12
AXIS_H = 22  # tick labels under the plot


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str  # the value as written
    y: float
    width: float
    colour: int  # the mode's place in the run: its CSS class


@dataclass(frozen=True)
class Group:
    label: str
    y: float  # its name's baseline
    bars: list[Bar]


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: float
    plot_x: int
    plot_w: int
    plot_top: float
    plot_bottom: float
    groups: list[Group]
    ticks: list[Tick]
    bar_h: int = BAR_H


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten at or above `value`."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return float(next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value - 1e-12))


def bar_chart(groups: Sequence[tuple[str, Sequence[tuple[str, float]]]], *, scale: float | None = None,
              digits: int = 3, unit: str = "", ticks: int = 4, colours: Sequence[str] = ()) -> Chart:
    """`groups`: (group name, [(bar name, value)]) in order; `scale`: the value at the
    plot's right edge (default: a round number at or above the largest value);
    `colours`: bar names in the order of the palette, so a mode keeps its colour in
    every chart (a name not in it takes its place in the group)."""
    top = scale if scale is not None else nice_ceiling(max((v for _, bars in groups for _, v in bars), default=0))
    plot_x, plot_w = LABEL_W, WIDTH - LABEL_W - VALUE_W
    y, laid = 0.0, []
    for name, bars in groups:
        head = y + HEAD_H - 7
        y += HEAD_H
        placed = []
        for place, (label, value) in enumerate(bars):
            colour = colours.index(label) if label in colours else place
            placed.append(Bar(label, value, f"{value:.{digits}f}{unit}", y, plot_w * min(max(value, 0) / top, 1),
                              colour))
            y += BAR_H + BAR_GAP
        laid.append(Group(name, head, placed))
        y += GROUP_GAP
    bottom = y - GROUP_GAP + BAR_GAP
    marks = [Tick(plot_x + plot_w * i / ticks, _tick(top * i / ticks, unit)) for i in range(ticks + 1)]
    return Chart(WIDTH, bottom + AXIS_H, plot_x, plot_w, 0.0, bottom, laid, marks)


def _tick(value: float, unit: str) -> str:
    return f"{value:g}{unit}"
