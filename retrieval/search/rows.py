"""What the ranking statements of search return, and the named SQL parameters they take."""

from __future__ import annotations

from typing import NamedTuple


class Row(NamedTuple):
    """One ranked chunk."""

    chunk: int
    document: int
    score: float


Params = dict[str, float | str | list[int] | list[float] | list[str]]  # named SQL parameters
