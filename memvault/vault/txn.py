"""Transactions as the vault sees them: databases by name, journaled changes included.

The vault never holds LMDB handles: a compaction replaces the environment
underneath it (see Store.rebuild), so every access names its database
(schema.py) and is resolved against the environment of the moment.
"""

from __future__ import annotations

from collections.abc import Iterator

import lmdb

from .journal import DELETE, PUT, Op
from .schema import DB_NAMES

DB_INDEX = {name: i for i, name in enumerate(DB_NAMES)}

Overlay = dict[tuple[int, bytes], bytes | None]
"""Journaled changes not yet in LMDB: (database index, key) -> value, None once deleted."""

_MISSING = object()


class ReadTxn:
    """A read transaction that sees journaled changes before LMDB's content."""

    def __init__(self, lmdb_txn: lmdb.Transaction, dbs: dict, overlay: Overlay) -> None:
        self.lmdb_txn = lmdb_txn
        self.dbs = dbs
        self.overlay = overlay

    def get(self, key: bytes, db: str):
        found = self.overlay.get((DB_INDEX[db], bytes(key)), _MISSING)
        if found is not _MISSING:
            return found
        return self.lmdb_txn.get(key, db=self.dbs[db])

    def items(self, db: str) -> Iterator[tuple[bytes, memoryview]]:
        """Every key and value of a database in key order."""
        index = DB_INDEX[db]
        changed = {key: value for (i, key), value in self.overlay.items() if i == index}
        with self.lmdb_txn.cursor(self.dbs[db]) as cur:
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

    def put(self, key: bytes, value: bytes, db: str) -> None:
        self.lmdb_txn.put(key, value, db=self.dbs[db])

    def delete(self, key: bytes, db: str) -> None:
        self.lmdb_txn.delete(key, db=self.dbs[db])


class PendingTxn(ReadTxn):
    """The write-transaction API, recording operations for the journal."""

    def __init__(self, lmdb_txn: lmdb.Transaction, dbs: dict, overlay: Overlay) -> None:
        super().__init__(lmdb_txn, dbs, overlay)
        self._local: Overlay = {}
        self.ops: list[Op] = []

    def put(self, key: bytes, value: bytes, db: str) -> None:
        index = DB_INDEX[db]
        self.ops.append(Op(index, PUT, bytes(key), bytes(value)))
        self._local[(index, bytes(key))] = bytes(value)

    def delete(self, key: bytes, db: str) -> None:
        index = DB_INDEX[db]
        self.ops.append(Op(index, DELETE, bytes(key)))
        self._local[(index, bytes(key))] = None

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


def apply_to_lmdb(txn: WriteTxn, entries: list[list[Op]]) -> None:
    for ops in entries:
        for op in ops:
            if op.kind == PUT:
                txn.put(op.key, op.value, DB_NAMES[op.db])
            else:
                txn.delete(op.key, DB_NAMES[op.db])
