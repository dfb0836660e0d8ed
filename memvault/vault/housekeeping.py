"""The unlocked vault's background jobs: moving the journal into LMDB, compacting.

Both run in one housekeeping thread, started on first need, and never under
the vault's lock: the store lets requests go on while they work (see
store.py), so a mount does not stall during a compaction of a large vault.
Asking for them is a deadline set under a lock, nothing more: `rm -rf` of
2,000 files re-arms the debounced compaction 2,000 times without starting
a thread each time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..errors import MemvaultError

log = logging.getLogger("memvault")

FLUSH_DELAY = 0.5
"""Seconds a journaled change may wait before it is moved into LMDB (one fsync per batch)."""
FLUSH_BYTES = 32 << 20
"""Journaled bytes past which the journal is moved into LMDB without waiting."""
DEFAULT_COMPACT_DELAY = 5.0
"""Seconds of quiet after a shred or a replaced record before the vault compacts itself."""


class Housekeeper:
    def __init__(
        self,
        flush: Callable[[], None],
        compact: Callable[[], None],
        compact_delay: float | None,
    ) -> None:
        self._flush = flush
        self._compact = compact
        self._compact_delay = compact_delay
        self._due = threading.Condition()
        self._flush_at: float | None = None
        self._compact_at: float | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def journal_grew(self, journaled_bytes: int) -> None:
        """Journaled changes reach LMDB within FLUSH_DELAY, or at once past FLUSH_BYTES."""
        if not journaled_bytes:
            return
        delay = 0.0 if journaled_bytes > FLUSH_BYTES else FLUSH_DELAY
        with self._due:
            if self._stopped:
                return
            at = time.monotonic() + delay
            if self._flush_at is None or at < self._flush_at:
                self._flush_at = at
                self._wake()

    def compaction_owed(self) -> None:
        """(Re)arm the debounced compaction: it runs after a quiet moment."""
        if self._compact_delay is None:
            return
        with self._due:
            if self._stopped:
                return
            self._compact_at = time.monotonic() + self._compact_delay
            self._wake()

    def stop(self) -> None:
        """Cancel what is scheduled (a job already running finishes; the store waits for it)."""
        with self._due:
            self._stopped = True
            self._due.notify()

    def _wake(self) -> None:
        """(Lock held.) Start the thread, or tell it a deadline moved."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="housekeeping", daemon=True)
            self._thread.start()
        else:
            self._due.notify()

    def _run(self) -> None:
        while True:
            with self._due:
                job = self._next_job()
                while job is None:
                    if self._stopped:
                        return
                    deadlines = [t for t in (self._flush_at, self._compact_at) if t is not None]
                    timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                    self._due.wait(timeout)
                    job = self._next_job()
            job()

    def _next_job(self) -> Callable[[], None] | None:
        """The job that is due now, its deadline cleared (lock held)."""
        if self._stopped:
            return None
        now = time.monotonic()
        if self._flush_at is not None and self._flush_at <= now:
            self._flush_at = None
            return self._run_flush
        if self._compact_at is not None and self._compact_at <= now:
            self._compact_at = None
            return self._run_compaction
        return None

    def _run_flush(self) -> None:
        """Failures are logged (the journal keeps its entries); the thread goes on."""
        try:
            self._flush()
        except MemvaultError as exc:
            log.warning("moving the journal into the vault failed: %s", exc)
        except Exception as exc:  # the one housekeeping thread must outlive a surprise
            log.error("moving the journal into the vault failed: %s", type(exc).__name__)

    def _run_compaction(self) -> None:
        """Failures are logged; the compaction stays owed and is retried at close."""
        try:
            self._compact()
        except MemvaultError as exc:
            log.warning("compaction after shreds failed: %s", exc)
        except Exception as exc:
            log.error("compaction after shreds failed: %s", type(exc).__name__)
