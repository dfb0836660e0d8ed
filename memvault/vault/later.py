"""The vault's lock, and the bookkeeping that may wait until the mount has replied.

A write() must be sealed and in the journal before the mount replies; the
in-memory bookkeeping after it (the path tree, the accumulator, the audit
event, the housekeeper's timers) need not be. A hot path leaves that part in
``later``; whoever takes the lock next runs it first, so no reader, on any
thread, ever sees a change half applied. The mount runs it as soon as it has
replied, while the caller is still reading the reply (fs/readers.py): a
caller that pauses between changes never waits for it (one change at a time,
2 ms apart: a new file 20% sooner, an append 10-14%); one that sends its next
request at once waits for it as before (BENCHMARKS.md, the 04:45 run).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("memvault")


class LaterLock:
    """A reentrant lock that finishes the work left for later whenever it is taken."""

    __slots__ = ("_lock", "later")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.later: list[Callable[[], None]] = []

    def __enter__(self) -> LaterLock:
        self._lock.acquire()
        if self.later:
            self._run_later()
        return self

    def __exit__(self, *exc_info) -> None:
        self._lock.release()

    def _is_owned(self) -> bool:
        """Whether this thread holds it (as threading.RLock's)."""
        return self._lock._is_owned()

    def catch_up(self) -> None:
        """Run the work left for later now (the mount, after a reply)."""
        if self.later:
            with self:
                pass

    def _run_later(self) -> None:
        work, self.later = self.later, []
        for fn in work:
            try:
                fn()
            except Exception:  # pragma: no cover - bookkeeping of a change already durable
                log.exception("bookkeeping after a change failed")
