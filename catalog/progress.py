"""Progress: the callback the write path reports stages through (Progress), and what
commands show with it: a progress bar (count, rate and ETA on stderr, tqdm), and the
product's log lines only when asked for with -v 2."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Never

from tqdm import tqdm

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class ProgressBar:
    """A Progress(stage, done, total); one bar per stage."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._bars: dict[str, tqdm[Never]] = {}  # bars with a total, iterating nothing

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled or (total <= 1 and stage not in self._bars):
            return  # one-step stages (collect, chunk, write) need no bar
        bar = self._bars.get(stage)
        if bar is None:
            bar = self._bars[stage] = tqdm(total=total, desc=stage, unit="chunk", file=sys.stderr,
                                           dynamic_ncols=True, mininterval=0.5)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()


def command_logging(verbosity: int) -> None:
    """At the default verbosity a command prints its own summary, or its error in one
    line; the write path's log lines (and a failed run's traceback, which the run
    records as one line) show from -v 2."""
    if verbosity < 2:
        for name in ("catalog", "retrieval"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
