"""When the mount last served a request, so that background work waits for a lull.

Indexing words, embedding, moving the journal into LMDB and compacting all
take CPU and, in Python, the GIL that the file system's own thread needs.
Idle CPU priority is not enough: a worker preempted while it holds the GIL
makes the next request wait for it, and on a small machine the cores that
look idle are the ones the caller of the file system is about to use. So
background jobs wait until the mount has been left alone for a moment; under
load that never pauses, each waits at most its ``patience`` and then runs, so
work is delayed, never starved.

A vault that is not mounted is never touched: its jobs run at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LULL_S = 0.3
"""Seconds without a request that make a lull."""


class Activity:
    """The time of the last file system request (a float store: no lock needed)."""

    def __init__(self) -> None:
        self._last = float("-inf")

    def touch(self) -> None:
        """A request is being served (called for every FUSE request: keep it cheap)."""
        self._last = time.monotonic()

    @property
    def last_request(self) -> float:
        """When the last request came (time.monotonic; -inf: none yet)."""
        return self._last

    def idle_for(self) -> float:
        """Seconds since the last request."""
        return time.monotonic() - self._last

    def wait_for_lull(
        self,
        patience: float,
        *,
        lull: float = LULL_S,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        """Block until no request came for ``lull`` seconds, for ``patience`` at most,
        or until ``stopping()`` says the caller is shutting down.

        Each sleep lasts until the earliest moment the lull could begin (at most
        LULL_S, so that stopping is seen soon): under constant requests a
        waiting thread wakes about three times a second, not ten, and each
        wake-up takes the GIL and a core from the mount."""
        deadline = time.monotonic() + patience
        while not stopping():
            now = time.monotonic()
            idle = now - self._last
            if idle >= lull or now >= deadline:
                return
            time.sleep(min(lull - idle, deadline - now, LULL_S))
