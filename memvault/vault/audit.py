"""The audit trail: who touched which memory, and when; sealed and hash-chained.

Each commit that has something to say stores one entry (LMDB database
``audit``, key: its sequence number) in the same transaction as the change
it describes (on a mount, in the journal entry that seals a burst of
changes: Writer.write): the events of that commit (create, write, rename,
shred...) and those noted since the last one (reads, a search, an
export). An event holds its time, its operation, its caller
(pid, uid, executable and command name of the process behind a FUSE
request; the CLI; the MCP server's ``--caller``) and the memory's path,
sealed under the memory's own data key: shredding a memory makes its path
in the trail unreadable too ("a shredded memory"). The entry is sealed under
the master key, bound to its sequence number, and carries a keyed BLAKE2b of
the entry before it; the sealed vault state holds the last entry's number
and hash. So an entry removed, reordered, altered or cut from the end is
found by `memvault audit verify`, which names the first broken link.

Reads, writes and searches are aggregated per caller and memory over a
minute: `grep -r` over the mount adds one read per file and minute, and an
editor saving every second one write. Retention is bounded (90 days by
default, and at most MAX_ENTRIES entries): pruning at lock removes the
oldest entries and leaves a sealed checkpoint (the last removed entry's
number and hash), from which verify still proves continuity.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import hmac
import json
import os
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..crypto import DecryptionError, Kind, open_sealed, seal
from .sealing import Sealer

WINDOW_S = 60.0
"""Repeated reads, writes and searches of one memory by one caller within this
many seconds are one event."""
AGGREGATED = frozenset({"read", "write", "search", "attr"})
DEFAULT_KEEP_DAYS = 90
MAX_ENTRIES = 250_000
"""Entries kept at most (about 50 MB of trail), whatever their age."""
LINK_SIZE = 32
NO_LINK = bytes(LINK_SIZE)
SWITCH = "MEMVAULT_AUDIT"
"""Set to "off" (in the daemon's environment) only to measure what the trail costs:
scripts/bench fs mounts a second vault so. Nothing is recorded then."""

_SEQ = struct.Struct(">Q")
clock = time.time_ns
"""When an event happens (a test moves it to make entries old)."""


# -- who is asking -------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who made a change or a read: a process behind a FUSE request, the CLI, or an
    MCP server speaking for a named agent."""

    kind: str  # "fs", "cli", "mcp", "memvault" (the vault's own work, at lock)
    pid: int = 0
    uid: int = -1
    exe: str = ""
    comm: str = ""
    name: str = ""  # the MCP server's --caller, or the CLI command
    json: str = field(default="", init=False, compare=False, repr=False)
    """Its encoding in an entry, made once: callers repeat, events are many."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "json", json.dumps(self.encode(), separators=(",", ":")))

    def key(self) -> tuple:
        return (self.kind, self.pid, self.uid, self.name)

    def encode(self) -> dict:
        return {k: v for k in _CALLER_FIELDS if (v := getattr(self, k)) != "" and v != -1}

    @classmethod
    def decode(cls, doc: dict) -> Caller:
        return cls(**{k: doc[k] for k in _CALLER_FIELDS if k in doc})


_CALLER_FIELDS = ("kind", "pid", "uid", "exe", "comm", "name")


THE_VAULT = Caller("memvault")
current_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar(
    "memvault_caller", default=THE_VAULT
)
"""Who the changes made in this context are for (set per FUSE request, per CLI
process, per MCP server)."""


def this_process(kind: str, name: str = "") -> Caller:
    return Caller(kind, os.getpid(), os.getuid(), _exe("self") or sys.executable, "", name)


_PROCESSES: dict[tuple[int, int], tuple[Caller, float]] = {}
_NAMED: dict[tuple[int, int], str] = {}


def name_process(pid: int, uid: int, name: str) -> None:
    """An MCP server (known by the pid its socket's peer credentials give) says for
    which agent it speaks: its requests are that agent's from now on."""
    if len(_NAMED) > 1024:
        _NAMED.clear()
    _NAMED[(pid, uid)] = name
    _PROCESSES.clear()  # its threads' requests too


def process_caller(tid: int, uid: int, kind: str = "fs") -> Caller:
    """The caller behind a FUSE request (whose pid is the calling thread's id) or a
    control request: the process's id, executable and command name, looked up in
    /proc once a window (a process that has exited keeps its pid and uid)."""
    now = time.monotonic()
    found = _PROCESSES.get((tid, uid))
    if found is not None and found[1] > now and (kind == "fs" or found[0].kind == kind):
        return found[0]
    if len(_PROCESSES) > 4096:
        _PROCESSES.clear()
    pid, comm = tid, ""
    try:
        with open(f"/proc/{tid}/status", "rb") as f:
            for line in f.read().decode(errors="replace").splitlines():
                key, _, value = line.partition(":")
                if key == "Name":
                    comm = value.strip()
                elif key == "Tgid":
                    pid = int(value)
                    break
    except (OSError, ValueError):
        pass
    name = _NAMED.get((pid, uid), "")
    caller = Caller("mcp" if name else kind, pid, uid, _exe(str(pid)), comm, name)
    _PROCESSES[(tid, uid)] = (caller, now + WINDOW_S)
    return caller


def _exe(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


# -- events and entries -------------------------------------------------------------


@dataclass(slots=True)
class Event:
    """What happened, noted as it happens: a memory's paths are sealed under its
    key at once (a key wiped by a later shred is never used)."""

    op: str
    caller: Caller
    record_id: bytes | None = None
    path: str = ""  # sealed (base64), for an event about a memory
    old_path: str = ""  # a rename's source, sealed the same way
    detail: str = ""  # vault-level events: what, in a few words (never a memory's path)
    time_ns: int = field(default_factory=lambda: clock())


@dataclass
class Pending:
    """The entry a commit will store: its number, sealed bytes and hash."""

    seq: int
    sealed: bytes
    link: bytes
    events: int


@dataclass(frozen=True)
class Shown:
    """One event as `memvault audit` shows it."""

    seq: int
    time_ns: int
    op: str
    caller: Caller
    path: str | None  # None: a shredded memory; "" a vault-level event
    old_path: str | None
    detail: str

    def as_json(self) -> dict:
        return {
            "entry": self.seq,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.time_ns / 1e9))
            + f".{self.time_ns % 1_000_000_000 // 1_000_000:03d}Z",
            "op": self.op,
            "caller": self.caller.encode(),
            "path": self.path,
            "shredded": self.path is None,
            **({"from": self.old_path} if self.old_path else {}),
            **({"detail": self.detail} if self.detail else {}),
        }


def _encode(e: Event) -> str:
    """An event as JSON, built by hand: this runs with every write. Operations are
    fixed words and paths base64; the caller and any detail go through json."""
    text = f'{{"t":{e.time_ns},"op":"{e.op}","c":{e.caller.json}'
    if e.record_id is not None:
        text += f',"r":"{e.record_id.hex()}","p":"{e.path}"'
        if e.old_path:
            text += f',"o":"{e.old_path}"'
    if e.detail:
        text += f',"d":{json.dumps(e.detail)}'
    return text + "}"


def seq_key(seq: int) -> bytes:
    return _SEQ.pack(seq)


class AuditLog:
    """The trail's head and the events waiting for the next commit (the vault's lock
    guards it, like the writer it belongs to)."""

    def __init__(self, sealer: Sealer) -> None:
        self._sealer = sealer
        self._ad = sealer.ad
        self._chain = hashlib.blake2b(key=sealer.derive(b"memvault.audit"), digest_size=LINK_SIZE)
        self.head_seq = 0
        self.head_link = NO_LINK
        self.enabled = os.environ.get(SWITCH) != "off"
        self.pending: list[Event] = []
        self._recent: dict[tuple, float] = {}
        self._sealed_paths: dict[bytes, dict[str, str]] = {}  # by record id, then path

    def note(
        self,
        op: str,
        caller: Caller,
        record_id: bytes | None = None,
        path: str = "",
        data_key: bytearray | None = None,
        *,
        old_path: str = "",
        detail: str = "",
    ) -> bool:
        """Add an event to the next entry; False for a repeat within the window (one
        event stands for all) or with the trail off."""
        if not self.enabled:
            return False
        if op in AGGREGATED:
            key = (op, record_id, caller.key())
            now = time.monotonic()
            last = self._recent.get(key)
            if last is not None and now - last < WINDOW_S:
                return False
            if len(self._recent) > 50_000:  # rarely: then at most one repeat each
                self._recent = {k: t for k, t in self._recent.items() if now - t < WINDOW_S}
                if len(self._recent) > 25_000:
                    self._recent.clear()
            self._recent[key] = now
        if record_id is not None:
            path = self._seal_path(record_id, data_key, path)
            old_path = self._seal_path(record_id, data_key, old_path) if old_path else ""
        self.pending.append(Event(op, caller, record_id, path, old_path, detail))
        return True

    def discard_since(self, count: int) -> None:
        """Forget the events noted after the first ``count`` (their commit failed)."""
        del self.pending[count:]

    def link(self, seq: int, sealed: bytes | memoryview) -> bytes:
        """The keyed hash of a stored entry that the next one (or the state) carries."""
        h = self._chain.copy()  # keyed once
        h.update(_SEQ.pack(seq))
        h.update(sealed)
        return h.digest()

    def next_entry(self) -> Pending | None:
        """The pending events sealed as the next entry (stored by the caller's
        commit; ``stored`` then moves the head), or None if there are none."""
        if not self.pending:
            return None
        seq = self.head_seq + 1
        events = ",".join(map(_encode, self.pending))
        plain = f'{{"prev":"{self.head_link.hex()}","events":[{events}]}}'.encode()
        sealed = self._sealer.seal(Kind.AUDIT, plain, seq_key(seq))
        return Pending(seq, sealed, self.link(seq, sealed), len(self.pending))

    def stored(self, entry: Pending) -> None:
        self.head_seq, self.head_link = entry.seq, entry.link
        del self.pending[: entry.events]

    def _seal_path(self, record_id: bytes, data_key: bytearray | None, path: str) -> str:
        """The path under the memory's own key, base64 (one seal per memory and path)."""
        paths = self._sealed_paths.get(record_id)
        sealed = None if paths is None else paths.get(path)
        if sealed is None:
            if data_key is None:
                return ""
            raw = seal(data_key, path.encode(), self._ad(Kind.AUDIT_PATH, record_id))
            sealed = base64.b64encode(raw).decode()
            if paths is None:
                if len(self._sealed_paths) > 100_000:
                    self._sealed_paths.clear()
                paths = self._sealed_paths[record_id] = {}
            paths[path] = sealed
        return sealed

    def forget(self, record_id: bytes) -> None:
        """A shredded memory: its sealed paths are not needed again."""
        self._sealed_paths.pop(record_id, None)

    # -- reading and checking -------------------------------------------------------

    def open_entry(self, seq: int, sealed) -> dict:
        """DecryptionError or ValueError if the entry is not what was stored at ``seq``."""
        plain = self._sealer.open(Kind.AUDIT, sealed, seq_key(seq))
        doc = json.loads(bytes(plain))
        if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
            raise ValueError("not an audit entry")
        return doc

    def shown(self, seq: int, doc: dict, data_key_of) -> Iterator[Shown]:
        """The events of an opened entry; ``data_key_of(record_id)`` gives a live
        memory's key (None once it is shredded)."""
        for e in doc["events"]:
            path = old = ""
            if "r" in e:
                record_id = bytes.fromhex(e["r"])
                key = data_key_of(record_id)
                path = self._open_path(key, record_id, e.get("p", ""))
                old = self._open_path(key, record_id, e.get("o", "")) if "o" in e else ""
            yield Shown(seq, e["t"], e["op"], Caller.decode(e["c"]), path, old, e.get("d", ""))

    def _open_path(self, key, record_id: bytes, sealed: str) -> str | None:
        if key is None or not sealed:
            return None
        try:
            ad = self._ad(Kind.AUDIT_PATH, record_id)
            return bytes(open_sealed(key, base64.b64decode(sealed), ad)).decode()
        except (DecryptionError, ValueError):
            return None

    def verify(self, entries: Iterator[tuple[int, bytes]], checkpoint: tuple[int, bytes]) -> str:
        """Walk the chain from the checkpoint to the head in the sealed state;
        return "" if it holds, else a sentence naming the first broken link."""
        seq, prev = checkpoint
        for stored_seq, sealed in entries:
            if stored_seq <= checkpoint[0]:
                return f"entry {stored_seq} is older than the checkpoint yet still stored"
            if stored_seq != seq + 1:
                return f"entry {seq + 1} is missing (the next one stored is {stored_seq})"
            try:
                doc = self.open_entry(stored_seq, sealed)
            except (DecryptionError, ValueError):
                return f"entry {stored_seq} fails authentication (altered, or moved from elsewhere)"
            if not hmac.compare_digest(bytes.fromhex(doc["prev"]), prev):
                return f"entry {stored_seq} does not follow entry {seq} (one was replaced)"
            seq, prev = stored_seq, self.link(stored_seq, sealed)
        if seq < self.head_seq:
            missing = self.head_seq - seq
            return f"the last {missing} entr{'y is' if missing == 1 else 'ies are'} missing"
        if seq != self.head_seq or not hmac.compare_digest(prev, self.head_link):
            return "the trail does not end where the sealed vault state says it does"
        return ""


def reanchor(log: AuditLog, entries: list[tuple[int, bytes]]) -> tuple[int, int, bytes]:
    """Where a trail with a broken link starts again (`memvault repair`): walking back
    from the head the sealed state names, the longest run of entries that
    authenticate and chain to it. Returns how many of ``entries`` (oldest first)
    come before that run, and the number and hash the run continues from: the
    checkpoint that replaces them."""
    seq, link = log.head_seq, log.head_link
    kept = 0
    for stored_seq, sealed in reversed(entries):
        if stored_seq != seq or not hmac.compare_digest(log.link(stored_seq, sealed), link):
            break
        try:
            doc = log.open_entry(stored_seq, sealed)
            link = bytes.fromhex(doc["prev"])
        except (DecryptionError, ValueError):
            break
        seq, kept = stored_seq - 1, kept + 1
    return len(entries) - kept, seq, link


@dataclass(frozen=True)
class Checkpoint:
    """Where the kept trail begins: the last pruned entry's number and hash."""

    seq: int = 0
    link: bytes = NO_LINK
    pruned: int = 0
    keep_days: int = DEFAULT_KEEP_DAYS

    def encode(self) -> bytes:
        return json.dumps(
            {
                "seq": self.seq,
                "link": self.link.hex(),
                "pruned": self.pruned,
                "keep": self.keep_days,
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Checkpoint:
        doc = json.loads(bytes(data))
        return cls(
            int(doc["seq"]), bytes.fromhex(doc["link"]), int(doc["pruned"]), int(doc["keep"])
        )
