"""One sync: check what the remote holds, push this device's changes, merge, apply.

The order is what keeps every write: (1) the vault is compared with what
the last sync left in it; each difference becomes a change, made on the
version this device had (its base), uploaded with the keys of its versions
and recorded in the vault at once (it is never sent twice). (2) Everything
new on the remote is downloaded and checked (enrolments, each device's log
in sequence, the key objects); any failure stops the sync before anything
is applied, and the next sync downloads it again. (3) All changes seen
merge into one tree (merge.py) that (4) is written into the vault. (5)
Versions that a deletion removed lose their keys on the remote: the key
objects holding them are rewritten without them and deleted. (6) Once
this device's log has grown to COMPACT_SEGMENTS objects, its newest become
one snapshot without the content of replaced versions, whose keys go too.

Only memories (files) and directories sync; symbolic links stay local.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from nacl.signing import SigningKey

from .. import paths
from ..errors import DeviceRemoved, RemoteTampered
from ..vault.records import DIRECTORY as VAULT_DIR
from ..vault.records import FILE as VAULT_FILE
from . import objects
from .merge import DIRECTORY, FILE, Op, Placed, Version, heads, merge
from .objects import Device, LogEntry, ObjectError
from .remote import Remote, stale_uploads
from .state import Local, SyncState, save

LOG_BATCH_BYTES = 4 << 20
"""A push larger than this is split into several log entries."""
PULL_ATTEMPTS = 3
COMPACT_SEGMENTS = 16
"""A device's log is compacted once it is this many objects (see Sync.compact)."""
TEMP_PREFIX = ".memvault-sync-"
CONFLICT_MARK = " (conflict from "


@dataclass
class Report:
    pushed: int = 0
    pulled: int = 0
    written: int = 0
    removed: int = 0
    conflicts: list[str] = field(default_factory=list)
    keys_deleted: int = 0
    compacted: int = 0  # objects of this device's log a snapshot replaced
    touched: set[str] = field(default_factory=set)  # paths this sync changed here

    @property
    def changed_anything(self) -> bool:
        return bool(self.pushed or self.pulled or self.touched)

    def sentence(self) -> str:
        parts = [f"sent {self.pushed} change(s)", f"received {self.pulled}"]
        if self.written or self.removed:
            parts.append(f"wrote {self.written} and removed {self.removed} here")
        if self.compacted:
            parts.append(f"compacted {self.compacted} object(s) of this device's log into one")
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} conflict copy(ies): {', '.join(self.conflicts)}")
        return "Synced: " + ", ".join(parts) + "."


def dir_memory(state: SyncState, path: str) -> str:
    """A directory's memory id: the same on every device for one path (keyed, so
    it says nothing of the path)."""
    mac = hashlib.blake2b(
        path.encode(), key=bytes(state.first_key()), digest_size=16, person=b"mv.sync.dir"
    )
    return mac.hexdigest()


SHARED = "shared"
"""Team spaces live under shared/NAME/; the personal group never syncs shared/."""


@dataclass(frozen=True)
class Scope:
    """Which part of the vault a group syncs: everything but shared/ (the personal
    group), or shared/NAME/ (a team space, whose paths on the remote are relative
    to it)."""

    prefix: str

    @classmethod
    def of(cls, state: SyncState) -> Scope:
        return cls(f"{SHARED}/{state.share}" if state.share else "")

    def remote(self, path: str) -> str | None:
        """The group's name for a vault path (None: not this group's, or its root)."""
        if not self.prefix:
            return None if paths.is_within(path, SHARED) else path
        if path.startswith(self.prefix + "/"):
            return path[len(self.prefix) + 1 :]
        return None

    def local(self, path: str) -> str:
        """The vault path of a group path ("" is the group's root)."""
        if not self.prefix:
            return path
        return f"{self.prefix}/{path}" if path else self.prefix


class _Vanished(Exception):
    """An object listed a moment ago is gone (its device compacted its log)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Sync:
    """One sync of ``vault`` (opened by this process, the only writer) through ``remote``."""

    def __init__(self, vault, state: SyncState, remote: Remote) -> None:
        self.vault = vault
        self.state = state
        self.remote = remote
        self.report = Report()
        self.bodies: dict[str, tuple[dict, bytes]] = {}  # version -> (header, content)
        self.scope = Scope.of(state)
        self.listing: dict[str, int] = {}  # the remote as pull() found it
        self.segments: dict[str, list[tuple[int, int, str]]] = {}  # device -> its log objects
        self._signer = SigningKey(state.seed)

    # -- (2) what the remote holds ---------------------------------------------------

    def _tampered(self, what: str) -> RemoteTampered:
        return RemoteTampered(self.remote.spec, what)

    def pull(self) -> None:
        """Download and check everything new; raise RemoteTampered before changing
        anything. An object that vanishes between the listing and its download (a
        device compacting its log) makes the pull start over, a few times."""
        for _ in range(PULL_ATTEMPTS - 1):
            try:
                return self._pull_once()
            except _Vanished:
                continue
        try:
            return self._pull_once()
        except _Vanished as exc:
            raise self._tampered(f"{exc.args[0]} vanished while it was being read") from None

    def _pull_once(self) -> None:
        st = self.state
        listing = self.listing = self.remote.list()
        segments: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        new_devices, key_names, epochs = [], [], []
        for name in listing:
            parts = name.split("/")
            segment = objects.parse_segment(name)
            if segment is not None:
                device, first, last = segment
                segments[device].append((first, last, name))
            elif parts[0] == "devices" and len(parts) == 2 and parts[1] not in st.devices:
                new_devices.append(parts[1])
            elif parts[0] == "keys" and len(parts) == 2:
                key_names.append(name)
            elif parts[0] == "epochs" and len(parts) == 2 and parts[1].isdigit():
                epochs.append(int(parts[1]))
        new_epochs = [e for e in sorted(epochs) if e > st.epoch]
        if new_epochs and new_epochs != list(range(st.epoch + 1, new_epochs[-1] + 1)):
            raise self._tampered(f"change of keys {st.epoch + 1} of the group is missing")
        if st.epoch and st.epoch not in epochs:
            raise self._tampered(f"change of keys {st.epoch} of the group is gone")
        for device, (seen_seq, *_) in st.seen.items():
            if seen_seq and device not in segments:
                raise self._tampered(
                    f"the log of device {self._who(device)} is gone "
                    f"(this device had seen {seen_seq} change(s))"
                )
        self.segments = segments
        wanted = {}
        for device, found in segments.items():
            plan = self._plan(device, found)
            if plan:
                wanted[device] = plan
        fresh_keys = [n for n in key_names if n not in st.key_objects]
        needed = [objects.device_name(d) for d in new_devices]
        needed += [objects.epoch_name(e) for e in new_epochs]
        needed += [name for plan in wanted.values() for _, _, name in plan]
        got = self.remote.get_many(needed + fresh_keys)
        for name in needed:
            if name not in got:
                raise _Vanished(name)
        enrolled_in = {}
        for device in new_devices:
            raw = got[objects.device_name(device)]
            st.devices[device], enrolled_in[device] = self._open_enrolment(device, raw)
        for epoch in new_epochs:
            self._take_rotation(epoch, got[objects.epoch_name(epoch)])
        for device, epoch in enrolled_in.items():
            # Enrolled under a key that changed since, and not given the next one:
            # someone who kept an old key after a removal (or a device that joined
            # while the key changed, which must join again). None of its changes count.
            if epoch < st.epoch and device not in st.members.get(str(epoch + 1), ()):
                st.removed.setdefault(device, 0)
        for name in fresh_keys:
            raw = got.get(name)
            if raw is None:
                continue  # deleted since the listing (a shred): its keys are gone
            try:
                keys = objects.open_keys(st.group, st.keyring(), name, raw)
            except ObjectError as exc:
                raise self._tampered(str(exc)) from None
            st.key_objects[name] = sorted(keys)
            st.keys.update({v: k.hex() for v, k in keys.items()})
        for name in [n for n in st.key_objects if n not in listing]:
            del st.key_objects[name]  # rewritten or deleted by a shred
        for device, plan in wanted.items():
            self._take_log(device, plan, got)

    def _open_enrolment(self, device: str, raw: bytes) -> tuple[Device, int]:
        """The enrolment, and the epoch whose key sealed it."""
        st = self.state
        for epoch, key in sorted(st.keys_by_epoch().items(), reverse=True):
            try:
                return objects.open_device(st.group, key, device, raw), epoch
            except ObjectError as exc:
                last = exc
        raise self._tampered(str(last))

    def _take_rotation(self, epoch: int, raw: bytes) -> None:
        """A change of the group's key: from now on objects are sealed under the new
        one (given to this device in a sealed box, or known from the passphrase by a
        device that joined since), and a removed device's later changes count nowhere."""
        st = self.state

        def enrolled(device: str) -> bytes | None:
            known = st.devices.get(device)
            return None if known is None or device in st.removed else known.public_key

        try:
            rot = objects.open_rotation(st.group, st.keyring(), epoch, enrolled, raw)
            if st.device in rot.removed:
                raise DeviceRemoved(self.remote.spec, self._who(rot.by))
            if st.device in rot.wrapped:
                key = objects.unwrap_for_device(rot.wrapped[st.device], st.seed)
            elif str(epoch) in st.later_keys:
                key = bytearray.fromhex(st.later_keys[str(epoch)])
            else:  # it joined while the key changed: to join again
                raise DeviceRemoved(self.remote.spec, self._who(rot.by))
            if objects.previous_key(st.group, key, epoch, raw) != st.group_key:
                raise ObjectError(f"change of keys {epoch} does not follow the current key")
        except ObjectError as exc:
            raise self._tampered(str(exc)) from None
        st.old_keys[str(st.epoch)] = bytes(st.group_key).hex()
        st.later_keys.pop(str(epoch), None)
        st.group_key, st.epoch = key, epoch
        for device, last in rot.removed.items():
            st.removed[device] = int(last)
        st.members[str(epoch)] = sorted(rot.wrapped)
        st.forget_after_removal()

    def _plan(self, device: str, found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
        """The objects that carry a device's log past what this device has seen."""
        seen_seq = self.state.seen.get(device, [0, ""])[0]
        top = max(last for _, last, _ in found)
        if top < seen_seq:
            raise self._tampered(
                f"the log of device {self._who(device)} was rolled back: it ends at "
                f"change {top}, this device had seen change {seen_seq}"
            )
        plan = _chain(found, seen_seq)
        reached = plan[-1][1] if plan else seen_seq
        if reached < top:
            raise self._tampered(f"change {reached + 1} of device {self._who(device)} is missing")
        return plan

    def _who(self, device: str) -> str:
        known = self.state.devices.get(device)
        return f"{known.name} ({device[:8]})" if known else device[:8]

    def _take_log(self, device: str, plan: list[tuple[int, int, str]], got) -> None:
        st = self.state
        enrolled = st.devices.get(device)
        if enrolled is None:
            raise self._tampered(f"changes come from device {device[:8]}, which is not enrolled")
        seq, prev = st.seen.get(device, [0, ""])[:2]
        for first, last, name in plan:
            try:
                seg = objects.open_segment(
                    st.group, st.keyring(), name, enrolled.public_key, got[name]
                )
            except ObjectError as exc:
                raise self._tampered(f"{exc} (device {self._who(device)})") from None
            if first == seq + 1 and seg.prev != prev:  # a snapshot begun earlier cannot say
                raise self._tampered(
                    f"change {first} of device {self._who(device)} does not follow change "
                    f"{seq} (replayed or reordered)"
                )
            cutoff = st.removed.get(device)
            for wire in seg.ops:
                origin = wire.get("q", first) if isinstance(wire.get("q"), int) else first
                if cutoff is not None and origin > cutoff:
                    continue  # made after its device was removed: counts nowhere
                self.report.pulled += self._take_op(device, origin, wire)
            st.observe(seg.hlc)
            seq, prev = last, seg.digest
            st.seen[device] = [seq, seg.digest, seg.hlc]

    def _take_op(self, device: str, seq: int, wire: dict) -> bool:
        """True if the change was new here."""
        st = self.state
        try:
            version = Version.parse(wire["v"])
            memory = wire["m"]
            if version.device != device:
                raise ValueError
        except (KeyError, ValueError, TypeError):
            what = f"change {seq} of device {self._who(device)} is malformed"
            raise self._tampered(what) from None
        if str(version) in st.ops:
            return False  # known already (a snapshot repeats what this device saw)
        raw = {"m": memory, "b": wire.get("b"), "d": 1 if wire.get("d") else 0, "q": seq}
        if not raw["d"] and "s" in wire:  # a compacted log keeps replaced versions bare
            key = st.keys.get(str(version))
            if key is not None:
                try:
                    sealed = base64.b64decode(wire["s"])
                    header, content = objects.open_body(
                        st.group, bytes.fromhex(key), memory, version, sealed
                    )
                    raw.update(p=paths.normalize(header["p"]), k=header["k"])
                except (ObjectError, KeyError, ValueError, TypeError) as exc:
                    what = f"{exc} (change {seq} of device {self._who(device)})"
                    raise self._tampered(what) from None
                self.bodies[str(version)] = (header, content)
        st.ops[str(version)] = raw
        return True

    # -- (1) this device's changes ---------------------------------------------------

    def push(self, *, upload: bool = True) -> None:
        """Turn what changed in the vault since the last sync into changes, and upload
        them (``upload`` False: only count them)."""
        st = self.state
        wire_ops: list[dict] = []
        new_keys: dict[str, bytes] = {}
        by_record = {f.record: m for m, f in st.files.items()}
        present: set[str] = set()
        local_dirs: set[str] = set()
        for record_id, meta in self.vault.walk_records():
            path = self.scope.remote(meta.path)
            if path is None:
                continue  # not this group's (another group's, or the root of this one)
            if meta.type == VAULT_DIR:
                local_dirs.add(path)
                continue
            if meta.type != VAULT_FILE:
                continue  # symbolic links stay on this device
            memory = by_record.get(record_id.hex())
            known = st.files.get(memory) if memory is not None else None
            if known is None:
                memory = secrets.token_hex(16)
            present.add(memory)
            if known is not None and known.path == meta.path and known.body_gen == meta.body_gen:
                continue
            content = self.vault.get_record(record_id)
            header = {"p": path, "k": FILE, "mode": meta.mode, "mtime": meta.mtime_ns}
            base = known.version if known is not None else None
            version = self._new_op(wire_ops, new_keys, memory, base, header, content)
            st.files[memory] = Local(record_id.hex(), version, meta.path, meta.body_gen)
        for memory in [m for m in st.files if m not in present]:
            known = st.files.pop(memory)
            self._new_op(wire_ops, new_keys, memory, known.version, None, b"")
        current = self._current_versions()
        for path in sorted(local_dirs - st.dirs.keys()):
            memory = dir_memory(st, path)
            header = {"p": path, "k": DIRECTORY, "mode": 0o755, "mtime": 0}
            version = self._new_op(wire_ops, new_keys, memory, current.get(memory), header, b"")
            st.dirs[path] = memory
            current[memory] = version
        for path in sorted(st.dirs.keys() - local_dirs):
            memory = st.dirs.pop(path)
            self._new_op(wire_ops, new_keys, memory, current.get(memory), None, b"")
        if wire_ops and upload:
            self._upload(wire_ops, new_keys)
        elif wire_ops:
            self.report.pushed = len(wire_ops)

    def _current_versions(self) -> dict[str, str]:
        """Each memory's latest head, as this device knows it."""
        return {m: str(ranked[0].version) for m, ranked in self._heads().items()}

    def _heads(self) -> dict[str, list[Op]]:
        """Each memory's heads (the versions no change was made on), latest first."""
        by_memory: dict[str, list[Op]] = defaultdict(list)
        for version in self.state.ops:
            op = self.state.op_of(version)
            by_memory[op.memory].append(op)
        return {m: heads(ops) for m, ops in by_memory.items()}

    def _new_op(self, wire_ops, new_keys, memory, base, header, content) -> str:
        """A change made here: sealed under a fresh key, recorded, queued for upload."""
        st = self.state
        version = Version(st.tick(_now_ms()), st.device)
        wire = {"m": memory, "v": str(version), "b": base}
        raw = {"m": memory, "b": base, "d": 0}
        if header is None:
            wire["d"] = raw["d"] = 1
        else:
            key = os.urandom(32)
            sealed = objects.seal_body(st.group, key, memory, version, header, content)
            wire["s"] = base64.b64encode(sealed).decode()
            new_keys[str(version)] = key
            raw.update(p=header["p"], k=header["k"])
            self.bodies[str(version)] = (header, content)
        wire_ops.append(wire)
        st.ops[str(version)] = raw
        return str(version)

    def _upload(self, wire_ops: list[dict], new_keys: dict[str, bytes]) -> None:
        """The versions' keys first, then the log entries that use them (so a reader
        never meets a change whose key is not there yet)."""
        st = self.state
        uploads: dict[str, bytes] = {}
        if new_keys:
            name = f"keys/{secrets.token_hex(16)}"
            uploads[name] = objects.seal_keys(st.group, st.newest_key(), name, new_keys)
            st.key_objects[name] = sorted(new_keys)
            st.keys.update({v: k.hex() for v, k in new_keys.items()})
        seq, prev = st.seen.get(st.device, [0, ""])[:2]
        for batch in _batches(wire_ops, LOG_BATCH_BYTES):
            seq += 1
            entry = LogEntry(st.device, seq, prev, st.hlc, batch)
            uploads[objects.log_name(st.device, seq)] = objects.seal_log(
                st.group, st.newest_key(), self._signer, entry
            )
            prev = objects.digest(entry.payload())
        self.remote.put_many(uploads)
        st.seen[st.device] = [seq, prev, st.hlc]
        self.report.pushed += len(wire_ops)
        save(self.vault, st)  # what was sent is recorded before anything else happens

    # -- (3, 4) merge and apply ------------------------------------------------------

    def apply(self) -> dict[str, Placed]:
        st = self.state
        ops = [st.op_of(v) for v in st.ops]
        placed = merge(ops, st.device_names())
        for item in placed.values():
            if item.op.path is None:
                raise self._tampered(
                    f"the key of memory {item.memory[:8]} (version {item.version}) is missing"
                )
        files = {m: p for m, p in placed.items() if p.kind == FILE}
        contents = self._contents(files)
        vault = self.vault
        # A memory changed here since the scan (a write through the mount) is left
        # alone: the next sync sends that change, made on the version it replaces.
        for memory in [m for m in st.files if m not in files]:
            with vault.exclusive():
                if self._unchanged(st.files[memory]):
                    self._remove_file(st.files.pop(memory))
        here = self.scope.local
        moving = [m for m in files if m in st.files and st.files[m].path != here(files[m].path)]
        for memory in moving:  # out of the way first (a swap, a name freed by another move)
            local = st.files[memory]
            with vault.exclusive():
                if not self._unchanged(local):
                    del files[memory]
                    continue
                temp = here(f"{TEMP_PREFIX}{memory}")
                vault.rename(local.path, temp)
                self.report.touched.add(local.path)
                local.path = temp
        for memory, item in sorted(files.items(), key=lambda kv: kv[1].path):
            local = st.files.get(memory)
            target = here(item.path)
            with vault.exclusive():
                if local is not None and local.path != target:
                    self._make_parents(target)
                    vault.rename(local.path, target)
                    self.report.touched.update((local.path, target))
                    local.path = target
                stale = local is not None and local.version != str(item.version)
                if local is None or (stale and self._unchanged(local)):
                    self._write(memory, item, contents[str(item.version)])
        self._settle_dirs(placed)
        return placed

    def _unchanged(self, local: Local) -> bool:
        """The memory is as this device last synced it (path and content)."""
        meta = self.vault.by_record_id(bytes.fromhex(local.record))
        return (
            meta is not None
            and not meta.orphan
            and meta.path == local.path
            and meta.body_gen == local.body_gen
        )

    def _contents(self, files: dict[str, Placed]) -> dict[str, tuple[dict, bytes]]:
        """What every memory to write will hold, read before anything changes (a
        conflict copy may come from a version only this vault still has)."""
        st = self.state
        here = {f.version: f for f in st.files.values()}
        out = {}
        for memory, item in files.items():
            local = st.files.get(memory)
            version = str(item.version)
            if local is not None and local.version == version:
                continue
            if version in self.bodies:
                out[version] = self.bodies[version]
            elif version in here:
                header = {"mode": 0o644, "mtime": None}
                out[version] = (header, self.vault.get_record(bytes.fromhex(here[version].record)))
            else:
                raise self._tampered(f"version {version} of memory {memory[:8]} cannot be read")
        return out

    def _write(self, memory: str, item: Placed, body: tuple[dict, bytes]) -> None:
        header, content = body
        st = self.state
        local = st.files.get(memory)
        target = self.scope.local(item.path)
        if local is None:
            if CONFLICT_MARK in item.path:
                self.report.conflicts.append(target)
            self._make_parents(target)
            meta = self.vault.put(
                target, content, mode=header.get("mode"), mtime_ns=header.get("mtime")
            )
            record = self.vault.record_id(target)
            st.files[memory] = Local(record.hex(), str(item.version), target, meta.body_gen)
        else:
            meta = self.vault.put_record(bytes.fromhex(local.record), content)
            local.version, local.body_gen = str(item.version), meta.body_gen
        self.report.written += 1
        self.report.touched.add(target)

    def _remove_file(self, local: Local) -> None:
        self.vault.delete(local.path)
        self.report.removed += 1
        self.report.touched.add(local.path)

    def _make_parents(self, path: str) -> None:
        parent = paths.parent(path)
        if parent != paths.ROOT and not self.vault.exists(parent):
            self.vault.mkdir(parent, parents=True)
            self.report.touched.update(paths.ancestors(path))

    def _settle_dirs(self, placed: dict[str, Placed]) -> None:
        """Directories: those the merged tree names or needs exist, the others go
        (deepest first, and only when empty: an unsynced symlink keeps its own)."""
        st = self.state
        wanted: set[str] = set()
        for item in placed.values():
            if item.kind == DIRECTORY:
                wanted.add(item.path)
            wanted.update(paths.ancestors(item.path))
        scope = self.scope
        for path in sorted(wanted | ({""} if scope.prefix else set())):
            target = scope.local(path)
            if not self.vault.exists(target):
                self.vault.mkdir(target, parents=True)
                self.report.touched.update([*paths.ancestors(target), target])
        local = set()
        for _, meta in self.vault.walk_records():
            path = scope.remote(meta.path)
            if meta.type == VAULT_DIR and path is not None:
                local.add(path)
        for path in sorted(local - wanted, key=lambda p: p.count("/"), reverse=True):
            target = scope.local(path)
            if not self.vault.list(target):
                self.vault.delete(target)
                self.report.removed += 1
                self.report.touched.add(target)
        st.dirs = {path: dir_memory(st, path) for path in wanted}

    # -- (5) shreds reach the remote -------------------------------------------------

    def drop_removed_keys(self, placed: dict[str, Placed]) -> None:
        """Versions of memories the merged tree no longer has (shredded here or
        elsewhere) need no key: the key objects holding them are rewritten
        without them, then deleted. (Versions a later one replaced keep theirs
        until log compaction.)"""
        st = self.state
        placed_versions = {str(p.version) for p in placed.values()}
        live = {p.memory for p in placed.values()}
        self._keep_keys(lambda v: v in placed_versions or v not in st.ops or st.ops[v]["m"] in live)

    def _keep_keys(self, needed_version: Callable[[str], bool]) -> None:
        """Rewrite the key objects holding a key no longer needed without it (one new
        object for all the keys kept), then delete them."""
        st = self.state
        needed = {v for versions in st.key_objects.values() for v in versions if needed_version(v)}
        doomed = [
            n for n, versions in st.key_objects.items() if any(v not in needed for v in versions)
        ]
        if not doomed:
            return
        keep = {
            v: bytes.fromhex(st.keys[v])
            for n in doomed
            for v in st.key_objects[n]
            if v in needed and v in st.keys
        }
        uploads = {}
        if keep:
            name = f"keys/{secrets.token_hex(16)}"
            uploads[name] = objects.seal_keys(st.group, st.newest_key(), name, keep)
        self.remote.put_many(uploads)
        self.remote.delete_many(doomed)
        for name in doomed:
            del st.key_objects[name]
        for name in uploads:
            st.key_objects[name] = sorted(keep)
        still = {v for versions in st.key_objects.values() for v in versions}
        for version in [v for v in st.keys if v not in still]:
            del st.keys[version]
        self.report.keys_deleted += len(doomed)

    def forget_removed(self, placed: dict[str, Placed]) -> bool:
        """What this device keeps of removed memories: their ids and versions (the
        merge needs them), never their paths or keys (a shred leaves nothing
        readable here either). True if something was forgotten."""
        st = self.state
        forgot = False
        placed_versions = {str(p.version) for p in placed.values()}
        live = {p.memory for p in placed.values()}
        for version, raw in st.ops.items():
            if raw["m"] not in live and version not in placed_versions and "p" in raw:
                del raw["p"]
                raw.pop("k", None)
                st.keys.pop(version, None)
                forgot = True
        return forgot

    # -- (6) log compaction ------------------------------------------------------------

    def compact(self, *, force: bool = False) -> None:
        """This device's own log: once it has COMPACT_SEGMENTS objects (or when
        ``force``d: all of them), its newest objects become one snapshot that
        keeps the content of the versions still needed (every memory's heads)
        and of the others only what the merge needs (memory, version, base);
        the objects it replaces are deleted, and so are the keys of the
        versions whose content it left out. The newest half at least, and older
        objects as long as each is no larger than the newer ones taken so far:
        a large early object is rewritten only when enough came after it."""
        st = self.state
        own = self.segments.get(st.device, [])
        chain = _chain(own)
        leftovers = [seg[2] for seg in own if seg not in chain]  # an interrupted compaction's
        if chain and chain[-1][1] < max(last for _, last, _ in own):
            raise self._tampered("this device's own log has a gap")
        if len(chain) < 2 or (not force and len(chain) < COMPACT_SEGMENTS):
            self.remote.delete_many(leftovers)
            return
        run = chain
        if not force:
            run = chain[-(COMPACT_SEGMENTS // 2) :]
            total = sum(self.listing.get(name, 0) for _, _, name in run)
            for seg in reversed(chain[: -len(run)]):
                size = self.listing.get(seg[2], 0)
                if size > total:
                    break
                run.insert(0, seg)
                total += size
        got = self.remote.get_many(name for _, _, name in run)
        public_key = st.devices[st.device].public_key
        ops: list[dict] = []
        prev = digest = ""
        for i, (first, _, name) in enumerate(run):
            if name not in got:
                raise self._tampered(f"{name} of this device vanished")
            try:
                seg = objects.open_segment(st.group, st.keyring(), name, public_key, got[name])
            except ObjectError as exc:
                raise self._tampered(f"{exc} (this device)") from None
            if i == 0:
                prev = seg.prev
            digest = seg.digest
            ops.extend(op if "q" in op else {**op, "q": first} for op in seg.ops)
        live = {str(op.version) for ranked in self._heads().values() for op in ranked}
        kept = [op if op.get("v") in live else _bare(op) for op in ops]
        snap = objects.Snapshot(st.device, run[0][0], run[-1][1], prev, digest, st.hlc, kept)
        name = objects.snap_name(st.device, snap.first, snap.last)
        self.remote.put_many(
            {name: objects.seal_snapshot(st.group, st.newest_key(), self._signer, snap)}
        )
        self.remote.delete_many([n for _, _, n in run if n != name] + leftovers)
        self._keep_keys(lambda v: v in live or v not in st.ops)
        self.report.compacted += len(run)

    # -- all of it -------------------------------------------------------------------

    def run(self, *, compact: bool = False) -> Report:
        """One sync; ``compact``: rewrite this device's whole log without what is
        no longer needed (otherwise, as COMPACT_SEGMENTS says)."""
        self.push()  # saved on its own: what was sent is never sent twice
        self.pull()
        placed = self.apply()
        self.drop_removed_keys(placed)
        self.compact(force=compact)
        self.remote.delete_many(stale_uploads(self.listing))  # debris of cut uploads
        save(self.vault, self.state, forgets=self.forget_removed(placed))
        return self.report


def _bare(op: dict) -> dict:
    """A replaced version as a compacted log keeps it: which memory, which version,
    built on which (every device then finds the same heads), no content."""
    return {k: op[k] for k in ("m", "v", "b", "d", "q") if k in op}


def _chain(found: list[tuple[int, int, str]], after: int = 0) -> list[tuple[int, int, str]]:
    """The objects that carry a log on from change ``after`` (entries and snapshots,
    the widest where some overlap, as while a compaction deletes what its
    snapshot replaced), up to the first gap."""
    chain, pos = [], after
    while True:
        covering = [seg for seg in found if seg[0] <= pos + 1 <= seg[1]]
        if not covering:
            return chain
        best = max(covering, key=lambda seg: (seg[1], -seg[0]))
        chain.append(best)
        pos = best[1]


def _batches(ops: list[dict], limit: int) -> list[list[dict]]:
    out: list[list[dict]] = [[]]
    size = 0
    for op in ops:
        n = len(op.get("s", "")) + 200
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append(op)
        size += n
    return out
