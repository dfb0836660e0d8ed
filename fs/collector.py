"""Python's cyclic garbage collector, run when the mount pauses instead of during its bursts.

The collector scans every container object it tracks each time enough new
objects have survived two younger collections: an unlocked vault holds tens
of thousands of them (the path tree, the audit trail's caches, trio's and
the search index's), so such a full collection landing in a burst of
requests stalls it: one took 28 ms of a 190 ms atomic-save phase here (200
files), another 15 ms of creating 2,000 files. At each lull (no request for
LULL_S, after at least one since the last pass) the objects that survived so
far are collected and then frozen (gc.freeze): the collections a burst
triggers scan only what the burst itself made. Garbage among frozen objects
(a cycle that became unreachable after its freeze) waits for the next full
pass, which unfreezes everything first, once every FULL_EVERY_S at most.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import trio

from ..activity import LULL_S, Activity

FULL_EVERY_S = 600.0
"""Seconds between the passes that collect frozen objects too (at a lull)."""


class LullCollector:
    """What one pass at a lull does (the daemon's task calls ``at_lull``)."""

    def __init__(
        self, full_every: float = FULL_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._full_every = full_every
        self._clock = clock
        self._full_at = clock() + full_every
        self._seen: float | None = None  # the last request's time at the last pass

    def at_lull(self, last_request: float) -> str | None:
        """Collect and freeze what survived, if a request came since the last pass:
        "young" (frozen objects left alone), "full" (those too), or None."""
        if last_request == self._seen:
            return None
        self._seen = last_request
        now = self._clock()
        kind = "young"
        if now >= self._full_at:
            gc.unfreeze()
            self._full_at = now + self._full_every
            kind = "full"
        gc.collect()
        gc.freeze()
        return kind


async def collect_at_lulls(activity: Activity, *also: Callable[[], object]) -> None:
    """(A task of the mount's trio run, until cancelled.) At each lull, what
    ``also`` lists runs too, after the collection: short steps of work kept
    for the mount's pauses."""
    collector = LullCollector()
    while True:
        await trio.sleep(LULL_S)
        if activity.idle_for() >= LULL_S:
            collector.at_lull(activity.last_request)
            for job in also:
                job()
