"""The unlocked vault's background jobs: moving the journal into LMDB, compacting.

Both run in one housekeeping thread, started on first need, and never under
the vault's lock: the store lets requests go on while they work (see
store.py), so a mount does not stall during a compaction of a large vault.
Asking for them is a deadline set under a lock, nothing more: `rm -rf` of
2,000 files re-arms the debounced compaction 2,000 times without starting
a thread each time. Both wait for a lull in the mount's requests (see
activity.py), for a few seconds at most: the file system comes first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..activity import LULL_S, Activity
from ..errors import MemvaultError

log = logging.getLogger("memvault")

FLUSH_DELAY = 0.5
"""Seconds a journaled change may wait before it is moved into LMDB (one fsync per batch)."""
FLUSH_BYTES = 256 << 20
"""Journaled bytes past which the journal is moved into LMDB without waiting for a
lull: a large file streams into the journal, and is copied into LMDB once its
writer pauses (the journal's disk space is bounded by this meanwhile)."""
DEFAULT_COMPACT_DELAY = 5.0
"""Seconds of quiet after a shred or a replaced record before the vault compacts itself."""
FLUSH_PATIENCE = 5.0
COMPACT_PATIENCE = 30.0
"""Seconds a due job waits at most for a lull in the mount's requests."""
LULL_POLL_S = 0.1


class Housekeeper:
    def __init__(
        self,
        flush: Callable[[], None],
        compact: Callable[[], None],
        compact_delay: float | None,
        activity: Activity,
    ) -> None:
        self._activity = activity
        self._flush = flush
        self._compact = compact
        self._compact_delay = compact_delay
        self._due = threading.Condition()
        self._flush_at: float | None = None
        self._flush_urgent = False
        self._compact_at: float | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._running: str | None = None

    def committed(self, journaled_bytes: int, *, owes_compaction: bool) -> None:
        """After a commit: journaled changes reach LMDB within FLUSH_DELAY (at once
        past FLUSH_BYTES), and the compaction it owes is (re)armed. One lock for
        both: this runs on every write() and unlink."""
        with self._due:
            if self._stopped:
                return
            if owes_compaction:
                self._arm_compaction()
            if not journaled_bytes:
                return
            urgent = journaled_bytes > FLUSH_BYTES
            at = time.monotonic() + (0.0 if urgent else FLUSH_DELAY)
            if self._flush_at is None or at < self._flush_at:
                self._flush_at = at
                self._flush_urgent = urgent
                self._wake()
            elif urgent and not self._flush_urgent:  # due, waiting for a lull: no longer
                self._flush_urgent = True
                self._wake()

    def audit_noted(self) -> None:
        """A read or search was noted for the audit trail: stored with the next flush."""
        with self._due:
            if self._stopped or self._flush_at is not None:
                return
            self._flush_at = time.monotonic() + FLUSH_DELAY
            self._wake()

    def _arm_compaction(self) -> None:
        """(Re)arm the debounced compaction: it runs after a quiet moment. A later
        deadline needs no wake-up (the thread finds it when the old one passes):
        `rm -rf` of 2,000 files costs no thread switch per file (lock held)."""
        if self._compact_delay is None:
            return
        armed = self._compact_at is not None
        self._compact_at = time.monotonic() + self._compact_delay
        if not armed:
            self._wake()

    def scheduled(self) -> list[str]:
        """The jobs due later or running now ("flush", "compaction"), for `status`."""
        with self._due:
            due = {"flush": self._flush_at, "compaction": self._compact_at}
            return [job for job, at in due.items() if at is not None or self._running == job]

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
                    self._due.wait(self._wait_time())
                    job = self._next_job()
                self._running = job
            try:
                if job == "flush":
                    self._run_flush()
                else:
                    self._run_compaction()
            finally:
                with self._due:
                    self._running = None

    def _wait_time(self) -> float | None:
        """Until the next deadline; a job that is due but waits for a lull looks
        again when the lull could have begun, LULL_POLL_S at the least (lock held)."""
        deadlines = [t for t in (self._flush_at, self._compact_at) if t is not None]
        if not deadlines:
            return None
        return max(min(deadlines) - time.monotonic(), 0.0) or max(
            LULL_S - self._activity.idle_for(), LULL_POLL_S
        )

    def _next_job(self) -> str | None:
        """The job that is due now and may run, its deadline cleared (lock held).

        A due job runs in a lull of the mount's requests, or once it has waited
        its patience; a journal past FLUSH_BYTES is moved at once. The loop
        decides, not the job: a compaction waiting for a lull never holds up
        an urgent flush."""
        if self._stopped:
            return None
        now = time.monotonic()
        lull = self._activity.idle_for() >= LULL_S

        def may_run(due: float | None, patience: float) -> bool:
            return due is not None and due <= now and (lull or now >= due + patience)

        if may_run(self._flush_at, 0.0 if self._flush_urgent else FLUSH_PATIENCE):
            self._flush_at = None
            return "flush"
        if may_run(self._compact_at, COMPACT_PATIENCE):
            self._compact_at = None
            return "compaction"
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
