"""A progress bar for commands: count, rate and ETA on stderr (tqdm)."""

from __future__ import annotations

import sys

from tqdm import tqdm


class ProgressBar:
    """Callable as a services.Progress(stage, done, total); one bar per stage."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._bars: dict[str, tqdm] = {}

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
