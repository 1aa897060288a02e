"""Processes that end when the process that started them does, however it ends.

A parent stopped in order stops its children itself; one killed with SIGKILL cannot, and
its children would go on serving (holding the port, running tasks) with no one to stop
them. Linux sends a process a chosen signal when its parent exits (prctl
PR_SET_PDEATHSIG); elsewhere this does nothing and such children can be left behind.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from functools import partial

PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def die_with_parent(signum: int, parent: int) -> None:
    """Have `signum` sent to this process when its parent (pid `parent`) exits; now, if
    it already has (this process was adopted before asking)."""
    if _prctl is None:
        return
    if _prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os.kill(os.getpid(), signum)


def child_dies_with_this_process(signum: int) -> Callable[[], None]:
    """A subprocess.Popen preexec_fn: the child gets `signum` when this process exits (the
    setting survives exec)."""
    return partial(die_with_parent, signum, os.getpid())
