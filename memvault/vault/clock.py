"""File times, from the kernel's coarse clock: the one ext4 stamps files with.

Times have the resolution of a scheduler tick (4 ms here), so a create and
the write that follows it within that tick share one mtime, as on ext4. The
mount relies on it: the kernel drops a file's cached pages whenever it is
shown an mtime other than the one it knows (FUSE's auto_inval_data), and it
stamps a write with its own clock before it sends it: the pages of a file
written through the mount (and those the mount handed it, fs/operations.py,
open) survive the next stat only while both clocks gave the write one mtime.
"""

from __future__ import annotations

import time

CLOCK_REALTIME_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)  # Linux's id for it


def _coarse_ns() -> int:
    return time.clock_gettime_ns(CLOCK_REALTIME_COARSE)


try:
    _coarse_ns()
    now_ns = _coarse_ns
except OSError:  # pragma: no cover - a kernel without the coarse clock
    now_ns = time.time_ns
