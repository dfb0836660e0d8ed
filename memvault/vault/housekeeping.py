"""The unlocked vault's background jobs: moving the journal into LMDB, compacting.

Both run in timer threads and never under the vault's lock: the store lets
requests go on while they work (see store.py), so a mount does not stall
during a compaction of a large vault.
"""

from __future__ import annotations

import logging
import threading
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
        self._mu = threading.Lock()
        self._flush_timer: threading.Timer | None = None
        self._compact_timer: threading.Timer | None = None
        self._stopped = False

    def journal_grew(self, journaled_bytes: int) -> None:
        """Journaled changes reach LMDB within FLUSH_DELAY, or at once past FLUSH_BYTES."""
        if not journaled_bytes:
            return
        with self._mu:
            if self._stopped or self._flush_timer is not None:
                return
            delay = 0.0 if journaled_bytes > FLUSH_BYTES else FLUSH_DELAY
            self._flush_timer = self._start(delay, self._run_flush)

    def compaction_owed(self) -> None:
        """(Re)arm the debounced compaction: it runs after a quiet moment."""
        if self._compact_delay is None:
            return
        with self._mu:
            if self._stopped:
                return
            if self._compact_timer is not None:
                self._compact_timer.cancel()
            self._compact_timer = self._start(self._compact_delay, self._run_compaction)

    def stop(self) -> None:
        """Cancel what is scheduled (a job already running finishes; the store waits for it)."""
        with self._mu:
            self._stopped = True
            for timer in (self._flush_timer, self._compact_timer):
                if timer is not None:
                    timer.cancel()

    @staticmethod
    def _start(delay: float, fn: Callable[[], None]) -> threading.Timer:
        timer = threading.Timer(delay, fn)
        timer.daemon = True
        timer.start()
        return timer

    def _run_flush(self) -> None:
        with self._mu:
            self._flush_timer = None
        try:
            self._flush()
        except MemvaultError as exc:
            log.warning("moving the journal into the vault failed: %s", exc)

    def _run_compaction(self) -> None:
        """Failures are logged; the compaction stays owed and is retried at close."""
        with self._mu:
            self._compact_timer = None
        try:
            self._compact()
        except MemvaultError as exc:
            log.warning("compaction after shreds failed: %s", exc)
