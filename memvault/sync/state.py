"""What one device knows of its sync group, sealed in its own vault.

The group key and the device's signing key never leave the vault except
wrapped (the ``group`` object) or as a public key (the enrolment). The rest
is bookkeeping that lets a sync check the remote and merge without
downloading everything again: how far each device's log goes (sequence
number and the digest of its last entry, to catch a log cut, rolled back or
replaced), every change seen (without contents: those live in the vault or
arrive with the change), the keys of the versions still needed, and which
local record each memory is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..crypto.context import Kind
from ..vault.schema import SHARES_KEY, SYNC_KEY
from .merge import Op, Version
from .objects import Device

FORMAT = 1


@dataclass
class Local:
    """A memory as this device last wrote it into (or read it from) its vault."""

    record: str  # the local record id (hex)
    version: str
    path: str
    body_gen: int


@dataclass
class SyncState:
    remote: str
    rclone_config: str | None
    group: bytes
    group_key: bytearray
    device: str
    name: str
    seed: bytes
    hlc: int = 0
    seq: int = 0
    prev: str = ""
    seen: dict[str, list] = field(default_factory=dict)  # device -> [seq, digest]
    devices: dict[str, Device] = field(default_factory=dict)
    ops: dict[str, dict] = field(default_factory=dict)  # version -> op (wire form, no body)
    keys: dict[str, str] = field(default_factory=dict)  # version -> key (hex)
    key_objects: dict[str, list[str]] = field(default_factory=dict)  # name -> versions
    files: dict[str, Local] = field(default_factory=dict)  # memory -> where it is here
    dirs: dict[str, str] = field(default_factory=dict)  # path -> memory of the directory
    watch: bool = False  # a mount of this vault syncs by itself (service.py)
    share: str | None = None  # a team space's name (shared/NAME/); None: the personal group
    epoch: int = 0  # how many times the group's key changed (group_key is the latest's)
    old_keys: dict[str, str] = field(default_factory=dict)  # epoch -> the key it had (hex)
    later_keys: dict[str, str] = field(default_factory=dict)  # a joiner's, until it reads them
    removed: dict[str, int] = field(default_factory=dict)  # device -> its last change that counts
    members: dict[str, list[str]] = field(default_factory=dict)  # epoch -> devices given its key

    def keys_by_epoch(self) -> dict[int, bytes | bytearray]:
        keys: dict[int, bytes | bytearray] = {
            int(e): bytes.fromhex(k) for e, k in self.old_keys.items()
        }
        keys[self.epoch] = self.group_key
        keys.update({int(e): bytes.fromhex(k) for e, k in self.later_keys.items()})
        return keys

    def keyring(self) -> list[bytes | bytearray]:
        """Every key the group has had, the newest first (objects open under their time's)."""
        keys = self.keys_by_epoch()
        return [keys[e] for e in sorted(keys, reverse=True)]

    def newest_key(self) -> bytes | bytearray:
        """What new objects are sealed under: the latest key this device knows."""
        if self.later_keys:
            return bytes.fromhex(self.later_keys[max(self.later_keys, key=int)])
        return self.group_key

    def forget_after_removal(self) -> None:
        """Changes a removed device made after its last one that counts: gone (every
        device drops the same ones, so all still merge alike)."""
        for version, raw in list(self.ops.items()):
            device = Version.parse(version).device
            if device in self.removed and raw.get("q", 0) > self.removed[device]:
                del self.ops[version]
                self.keys.pop(version, None)

    def first_key(self) -> bytes | bytearray:
        """The group's first key: what keys directory ids, the same in every epoch."""
        return bytes.fromhex(self.old_keys["0"]) if "0" in self.old_keys else self.group_key

    # -- the clock -----------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """A hybrid logical clock reading later than any this device saw."""
        self.hlc = max(self.hlc + 1, now_ms << 16)
        return self.hlc

    def observe(self, hlc: int) -> None:
        self.hlc = max(self.hlc, hlc)

    # -- the changes seen ----------------------------------------------------------

    def op_of(self, version: str) -> Op:
        raw = self.ops[version]
        base = raw.get("b")
        return Op(
            memory=raw["m"],
            version=Version.parse(version),
            base=Version.parse(base) if base else None,
            deleted=bool(raw.get("d")),
            kind=raw.get("k"),
            path=raw.get("p"),
        )

    def device_names(self) -> dict[str, str]:
        return {d: dev.name for d, dev in self.devices.items()}

    # -- stored in the vault -------------------------------------------------------

    def encode(self) -> bytes:
        doc = {
            "format": FORMAT,
            "remote": self.remote,
            "rclone_config": self.rclone_config,
            "group": self.group.hex(),
            "group_key": bytes(self.group_key).hex(),
            "device": self.device,
            "name": self.name,
            "seed": self.seed.hex(),
            "hlc": self.hlc,
            "seq": self.seq,
            "prev": self.prev,
            "seen": self.seen,
            "devices": {d: [v.name, v.public_key.hex()] for d, v in self.devices.items()},
            "ops": self.ops,
            "keys": self.keys,
            "key_objects": self.key_objects,
            "files": {m: [f.record, f.version, f.path, f.body_gen] for m, f in self.files.items()},
            "dirs": self.dirs,
            "watch": self.watch,
            "share": self.share,
            "epoch": self.epoch,
            "old_keys": self.old_keys,
            "later_keys": self.later_keys,
            "removed": self.removed,
            "members": self.members,
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | bytearray) -> SyncState:
        doc = json.loads(bytes(raw))
        return cls(
            remote=doc["remote"],
            rclone_config=doc["rclone_config"],
            group=bytes.fromhex(doc["group"]),
            group_key=bytearray.fromhex(doc["group_key"]),
            device=doc["device"],
            name=doc["name"],
            seed=bytes.fromhex(doc["seed"]),
            hlc=doc["hlc"],
            seq=doc["seq"],
            prev=doc["prev"],
            seen=doc["seen"],
            devices={
                d: Device(d, name, bytes.fromhex(key)) for d, (name, key) in doc["devices"].items()
            },
            ops=doc["ops"],
            keys=doc["keys"],
            key_objects=doc["key_objects"],
            files={m: Local(*f) for m, f in doc["files"].items()},
            dirs=doc["dirs"],
            watch=bool(doc.get("watch", False)),
            share=doc.get("share"),
            epoch=int(doc.get("epoch", 0)),
            old_keys=doc.get("old_keys", {}),
            later_keys=doc.get("later_keys", {}),
            removed=doc.get("removed", {}),
            members=doc.get("members", {}),
        )


def load(vault, share: str | None = None) -> SyncState | None:
    """The personal group's state, or that of the team space ``share``."""
    if share is not None:
        found = _shares(vault).get(share)
        return None if found is None else SyncState.decode(found.encode())
    raw = vault.sealed_setting(SYNC_KEY, Kind.SYNC, "its sync state")
    return None if raw is None else SyncState.decode(raw)


def share_names(vault) -> list[str]:
    return sorted(_shares(vault))


def save(vault, state: SyncState, *, forgets: bool = False) -> None:
    """``forgets``: this state drops what a shred removed (the old one is compacted away)."""
    if state.share is None:
        vault.put_sealed_setting(SYNC_KEY, Kind.SYNC, state.encode(), forgets=forgets)
        return
    shares = _shares(vault)
    shares[state.share] = state.encode().decode()
    doc = json.dumps(shares, separators=(",", ":")).encode()
    vault.put_sealed_setting(SHARES_KEY, Kind.SYNC, doc, forgets=forgets)


def _shares(vault) -> dict[str, str]:
    """Every team space's state (one sealed value: no space's name is an LMDB key)."""
    raw = vault.sealed_setting(SHARES_KEY, Kind.SYNC, "its team spaces")
    return {} if raw is None else json.loads(bytes(raw))
