"""Processes that must not outlive the one that started them.

A build process, a ``cp`` of a shard and a shard process all work in a shard's
directory. Should the server die, the next one removes unfinished generations
and opens the live one at start-up; a process of the dead server still loading,
flushing or writing there would race it. Linux kills them with their parent
(``PR_SET_PDEATHSIG``): at once, whatever they are doing, and without the
Python-level exit path that waits for a GIL-holding Edge call to return.
"""

from __future__ import annotations

import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux; elsewhere a no-op). Also
    when the parent is already gone: the check after the call closes that race."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
