"""Transactions as the vault sees them: databases by name, journaled changes included.

The vault never holds LMDB handles: a compaction replaces the environment
underneath it (see Store.rebuild), so every access names its database
(schema.py) and is resolved against the environment of the moment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import lmdb

from .journal import DELETE, PUT, REF_MIN, Op, Ref, StaleRef
from .schema import DB_NAMES

DB_INDEX = {name: i for i, name in enumerate(DB_NAMES)}

Overlay = dict[tuple[int, bytes], bytes | Ref | None]
"""Journaled changes not yet in LMDB: (database index, key) -> value (or where it lies
in the journal file), None once deleted."""

_MISSING = object()


Opener = Callable[[], tuple[lmdb.Transaction, dict]]
"""Begins the LMDB transaction (and takes the lock it needs) on first use."""


class ReadTxn:
    """A read transaction that sees journaled changes before LMDB's content.

    LMDB is only entered for a key the journal's overlay does not have: a
    request that reads what was just written never waits for a flush that
    holds LMDB through its commit and fsync.
    """

    def __init__(
        self, open_lmdb: Opener, overlay: Overlay, resolve: Callable[[Ref], bytes] | None = None
    ) -> None:
        self._open_lmdb = open_lmdb
        self._lmdb: lmdb.Transaction | None = None
        self._dbs: dict = {}
        self.overlay = overlay
        self._resolve = resolve

    def _begin(self) -> tuple[lmdb.Transaction, dict]:
        if self._lmdb is None:
            self._lmdb, self._dbs = self._open_lmdb()
        return self._lmdb, self._dbs

    def _in_overlay(self, found):
        """An overlay value, read from the journal if it lies there (_MISSING once
        the journal let go of it: LMDB has it then)."""
        if not isinstance(found, Ref):
            return found
        try:
            return self._resolve(found)
        except StaleRef:
            return _MISSING

    def get(self, key: bytes, db: str):
        found = self._in_overlay(self.overlay.get((DB_INDEX[db], bytes(key)), _MISSING))
        if found is not _MISSING:
            return found
        txn, dbs = self._begin()
        handle = dbs[db]
        return None if handle is None else txn.get(key, db=handle)

    def items(self, db: str) -> Iterator[tuple[bytes, memoryview]]:
        """Every key and value of a database in key order."""
        index = DB_INDEX[db]
        changed = {}
        for (i, key), value in list(self.overlay.items()):
            if i == index and (value := self._in_overlay(value)) is not _MISSING:
                changed[key] = value
        txn, dbs = self._begin()
        if dbs[db] is None:  # a database this (read-only) vault does not have yet
            yield from ((k, v) for k, v in sorted(changed.items()) if v is not None)
            return
        with txn.cursor(dbs[db]) as cur:
            if not changed:
                yield from cur.iternext(keys=True, values=True)
                return
            merged = {bytes(k): v for k, v in cur.iternext(keys=True, values=True)}
        merged.update(changed)
        for key in sorted(merged):
            if merged[key] is not None:
                yield key, merged[key]


class WriteTxn(ReadTxn):
    """A write transaction straight into LMDB."""

    def __init__(
        self, lmdb_txn: lmdb.Transaction, dbs: dict, overlay: Overlay, resolve: Callable
    ) -> None:
        super().__init__(lambda: (lmdb_txn, dbs), overlay, resolve)

    def put(self, key: bytes, value: bytes, db: str) -> None:
        txn, dbs = self._begin()
        txn.put(key, value, db=dbs[db])

    def delete(self, key: bytes, db: str) -> None:
        txn, dbs = self._begin()
        txn.delete(key, db=dbs[db])


class PendingTxn(ReadTxn):
    """The write-transaction API, recording operations for the journal."""

    def __init__(self, open_lmdb: Opener, overlay: Overlay, resolve: Callable) -> None:
        super().__init__(open_lmdb, overlay, resolve)
        self._local: Overlay = {}
        self.ops: list[Op] = []

    def put(self, key: bytes, value: bytes, db: str) -> None:
        """A small value is kept as bytes; a large one as given (a sealed chunk, in
        the bytearray seal() returns, which nobody changes): the journal
        replaces it with a reference to its copy in the file as soon as the
        entry is written. Copying each 64 KiB chunk twice into bytes took an
        eighth of a large write()'s time (13%, a 1 MiB write in process)."""
        index = DB_INDEX[db]
        key = bytes(key)
        if len(value) < REF_MIN:
            value = bytes(value)  # bytes stay as they are: no copy
        self.ops.append(Op(index, PUT, key, value))
        self._local[(index, key)] = value

    def delete(self, key: bytes, db: str) -> None:
        index = DB_INDEX[db]
        key = bytes(key)
        self.ops.append(Op(index, DELETE, key))
        self._local[(index, key)] = None

    def get(self, key: bytes, db: str):
        found = self._local.get((DB_INDEX[db], bytes(key)), _MISSING)
        if found is not _MISSING:
            return found
        return super().get(key, db)


def overlay_of(entries: list[list[Op]]) -> Overlay:
    overlay: Overlay = {}
    for ops in entries:
        apply_to_overlay(overlay, ops)
    return overlay


def apply_to_overlay(overlay: Overlay, ops: list[Op]) -> None:
    for op in ops:
        overlay[(op.db, op.key)] = op.value if op.kind == PUT else None


def apply_to_lmdb(txn: WriteTxn, entries: list[list[Op]], resolve: Callable[[Ref], bytes]) -> None:
    for ops in entries:
        for op in ops:
            if op.kind == PUT:
                value = resolve(op.value) if isinstance(op.value, Ref) else op.value
                txn.put(op.key, value, DB_NAMES[op.db])
            else:
                txn.delete(op.key, DB_NAMES[op.db])
