"""What the ranking statements of search return, and the named SQL parameters they take."""

from __future__ import annotations

Row = tuple[int, int, float]  # (chunk pk, document pk, score)


Params = dict[str, float | str | list[int] | list[float] | list[str]]  # named SQL parameters
