"""What a sync group keeps on its remote, and how each object is sealed.

Layout under ``REMOTE:PATH`` (every name random or a sequence number):

- ``group``: the group key wrapped under Argon2id(passphrase) (JSON: the
  group id, KDF parameters, salt, sealed key; the parameters and salt are
  bound into the seal, so editing them makes it fail to open);
- ``devices/<device>``: a device's enrolment (its name and Ed25519 public
  key), sealed under the group key: only a holder of the key enrols;
- ``log/<device>/<sequence>``: one batch of a device's changes, signed by
  the device and sealed under the group key, bound to the group, device,
  sequence number and kind; each names the digest of the one before it;
- ``snap/<device>/<first>-<last>``: a device's changes first..last in one
  object (log compaction), without the versions a later change replaced or
  a removal ended; signed and sealed like a log entry, it names the digest
  before ``first`` and the digest of ``last``, so the log stays one chain;
- ``groups/<epoch>``: after a change of keys (a device removed), the new
  key under the (new) passphrase, as ``group``; ``epochs/<epoch>``: the
  change itself, signed by the device that made it: whom it removes (and the
  last change of theirs that counts), the new key for each device that
  stays (a sealed box to its key), sealed under the old key, and the old
  key sealed under the new one;
- ``keys/<random>``: the keys of memory versions (each version's path and
  content are sealed under a key of its own), sealed under the group key. A
  shred deletes the objects holding the keys of the versions it removes
  (re-wrapping the others into a new object first).

Every sealed object is padded (padding.py) so its size says little about
what it holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.public import SealedBox
from nacl.signing import SigningKey, VerifyKey

from ..crypto.aead import DecryptionError, open_sealed, seal
from ..crypto.kdf import SALT_SIZE, KdfParams, derive_key
from ..crypto.secret import wipe
from ..vault.padding import bucket, frame, unframe
from .merge import Version

FORMAT = "memvault-sync/1"
_DOMAIN = b"memvault-sync/1\x00"
GROUP, DEVICE, LOG, KEYS, BODY, SNAP, EPOCH = 1, 2, 3, 4, 5, 6, 7
EPOCH_DIGITS = 6
SIG_SIZE = 64
SEQ_DIGITS = 12


class ObjectError(Exception):
    """An object fails authentication, its signature or its format (the message
    says which); the caller names the object."""


def ad(group: bytes, kind: int, name: str, extra: bytes = b"") -> bytes:
    """Associated data: the group, the kind, the object's name (device and
    sequence number for a log object), anything else it is bound to."""
    raw = name.encode()
    return b"".join((_DOMAIN, group, bytes([kind]), struct.pack(">H", len(raw)), raw, extra))


def _seal_padded(key: bytes | bytearray, data: bytes, binding: bytes) -> bytes:
    framed = frame(data)
    return seal(key, framed, binding, padded_len=bucket(len(framed)))


Keyring = bytes | bytearray | Sequence[bytes | bytearray]
"""A key, or the keys a group has had (the current first): an object sealed before
a change of keys opens under the key of its time."""


def _keys(keyring: Keyring) -> Sequence[bytes | bytearray]:
    return [keyring] if isinstance(keyring, (bytes, bytearray)) else keyring


def _open_padded(keyring: Keyring, sealed: bytes, binding: bytes, what: str) -> bytes:
    for key in _keys(keyring):
        try:
            return unframe(open_sealed(key, sealed, binding))
        except (DecryptionError, ValueError):
            continue
    raise ObjectError(f"{what} fails authentication")


def log_name(device: str, seq: int) -> str:
    return f"log/{device}/{seq:0{SEQ_DIGITS}d}"


def snap_name(device: str, first: int, last: int) -> str:
    return f"snap/{device}/{first:0{SEQ_DIGITS}d}-{last:0{SEQ_DIGITS}d}"


def parse_segment(name: str) -> tuple[str, int, int] | None:
    """(device, first, last) of a log entry or snapshot name; None for anything else."""
    parts = name.split("/")
    if len(parts) != 3:
        return None
    if parts[0] == "log" and parts[2].isdigit():
        seq = int(parts[2])
        return parts[1], seq, seq
    if parts[0] == "snap":
        first, _, last = parts[2].partition("-")
        if first.isdigit() and last.isdigit() and int(first) <= int(last):
            return parts[1], int(first), int(last)
    return None


def device_name(device: str) -> str:
    return f"devices/{device}"


# -- the group key ------------------------------------------------------------------


def groups_name(epoch: int) -> str:
    """The object that wraps the key of ``epoch`` under the passphrase (or share code)."""
    return "group" if epoch == 0 else f"groups/{epoch:0{EPOCH_DIGITS}d}"


def epoch_name(epoch: int) -> str:
    return f"epochs/{epoch:0{EPOCH_DIGITS}d}"


def wrap_group_key(
    group: bytes, key: bytearray, passphrase: bytearray, kdf: KdfParams, epoch: int = 0
) -> bytes:
    """The ``group`` object (``groups/<epoch>`` after a change of keys): the group
    key under Argon2id(passphrase)."""
    salt = os.urandom(SALT_SIZE)
    doc = {"format": FORMAT, "group": group.hex(), "kdf": kdf.as_dict(), "salt": salt.hex()}
    if epoch:
        doc["epoch"] = epoch
    kek = derive_key(passphrase, salt, kdf)
    try:
        doc["key"] = seal(kek, key, _group_ad(doc)).hex()
    finally:
        wipe(kek)
    return json.dumps(doc, sort_keys=True).encode() + b"\n"


def _group_ad(doc: dict) -> bytes:
    fields = ("format", "group", "kdf", "salt", "epoch")
    binding = json.dumps({k: doc[k] for k in fields if k in doc}, sort_keys=True)
    name = groups_name(int(doc.get("epoch", 0)))
    return ad(bytes.fromhex(doc["group"]), GROUP, name, binding.encode())


def group_id_of(raw: bytes) -> bytes:
    """The group id a ``group`` object names (unauthenticated until opened)."""
    try:
        doc = json.loads(raw)
        group = bytes.fromhex(doc["group"])
        if doc.get("format") != FORMAT or len(group) != 16:
            raise ValueError
        return group
    except (ValueError, KeyError, TypeError):
        raise ObjectError("the group object is not a memvault sync group") from None


def unwrap_group_key(raw: bytes, passphrase: bytearray, epoch: int = 0) -> tuple[bytes, bytearray]:
    """(group id, group key); ObjectError for a wrong passphrase or an altered object
    (or one moved from another epoch's name)."""
    group = group_id_of(raw)
    doc = json.loads(raw)
    if int(doc.get("epoch", 0)) != epoch:
        raise ObjectError(f"{groups_name(epoch)} names another change of keys")
    try:
        kdf = KdfParams.from_dict(doc["kdf"])
        kdf.validate()
        salt = bytes.fromhex(doc["salt"])
        sealed = bytes.fromhex(doc["key"])
    except (ValueError, KeyError, TypeError):
        raise ObjectError("the group object is damaged") from None
    kek = derive_key(passphrase, salt, kdf)
    try:
        return group, open_sealed(kek, sealed, _group_ad(doc))
    except DecryptionError:
        raise ObjectError("wrong passphrase for this sync group (or its key was altered)") from None
    finally:
        wipe(kek)


# -- devices ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    device: str
    name: str
    public_key: bytes


def seal_device(group: bytes, key: bytearray, device: Device) -> bytes:
    doc = {"device": device.device, "name": device.name, "key": device.public_key.hex()}
    data = json.dumps(doc, sort_keys=True).encode()
    return _seal_padded(key, data, ad(group, DEVICE, device_name(device.device)))


def open_device(group: bytes, key: bytearray, device: str, sealed: bytes) -> Device:
    what = f"the enrolment of device {device[:8]}"
    doc = _json(_open_padded(key, sealed, ad(group, DEVICE, device_name(device)), what), what)
    try:
        found = Device(doc["device"], doc["name"], bytes.fromhex(doc["key"]))
    except (KeyError, ValueError, TypeError):
        raise ObjectError(f"{what} is malformed") from None
    if found.device != device or len(found.public_key) != 32:
        raise ObjectError(f"{what} names another device")
    return found


# -- change logs -----------------------------------------------------------------------


def canonical(record) -> bytes:
    """The bytes a log entry, snapshot or rotation is signed and hashed as: every
    field of the dataclass, as JSON with sorted keys and no spaces."""
    return json.dumps(vars(record), sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LogEntry:
    """One batch of one device's changes (``ops`` in wire form, see engine.py)."""

    device: str
    seq: int
    prev: str  # digest of the device's previous entry ("" for the first)
    hlc: int
    ops: list[dict]

    def payload(self) -> bytes:
        return canonical(self)


def digest(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=32, person=b"mv.sync.log").hexdigest()


def _signed(group: bytes, payload: bytes) -> bytes:
    return _DOMAIN + group + b"log" + payload


def seal_log(group: bytes, key: bytearray, signer: SigningKey, entry: LogEntry) -> bytes:
    payload = entry.payload()
    signature = signer.sign(_signed(group, payload)).signature
    binding = ad(group, LOG, log_name(entry.device, entry.seq))
    return _seal_padded(key, signature + payload, binding)


def open_log(
    group: bytes, key: bytearray, device: str, seq: int, public_key: bytes, sealed: bytes
) -> tuple[LogEntry, str]:
    """The entry and its digest; ObjectError if it was altered, moved, or not
    signed by the device's enrolled key."""
    what = f"change {seq} of device {device[:8]}"
    raw = _open_padded(key, sealed, ad(group, LOG, log_name(device, seq)), what)
    signature, payload = raw[:SIG_SIZE], raw[SIG_SIZE:]
    try:
        VerifyKey(public_key).verify(_signed(group, payload), signature)
    except (BadSignatureError, ValueError):
        raise ObjectError(f"{what} is not signed by that device's enrolled key") from None
    doc = _json(payload, what)
    try:
        entry = LogEntry(doc["device"], int(doc["seq"]), doc["prev"], int(doc["hlc"]), doc["ops"])
    except (KeyError, ValueError, TypeError):
        raise ObjectError(f"{what} is malformed") from None
    if entry.device != device or entry.seq != seq or not isinstance(entry.ops, list):
        raise ObjectError(f"{what} claims to be another change")
    return entry, digest(payload)


@dataclass(frozen=True)
class Snapshot:
    """A device's changes ``first``..``last`` in one object (the versions still
    needed); ``prev`` is the digest before ``first``, ``digest`` that of ``last``."""

    device: str
    first: int
    last: int
    prev: str
    digest: str
    hlc: int
    ops: list[dict]

    def payload(self) -> bytes:
        return canonical(self)


def _signed_snap(group: bytes, payload: bytes) -> bytes:
    return _DOMAIN + group + b"snap" + payload


def seal_snapshot(group: bytes, key: bytearray, signer: SigningKey, snap: Snapshot) -> bytes:
    payload = snap.payload()
    signature = signer.sign(_signed_snap(group, payload)).signature
    binding = ad(group, SNAP, snap_name(snap.device, snap.first, snap.last))
    return _seal_padded(key, signature + payload, binding)


def open_snapshot(
    group: bytes,
    key: bytearray,
    device: str,
    first: int,
    last: int,
    public_key: bytes,
    sealed: bytes,
) -> Snapshot:
    what = f"changes {first}-{last} of device {device[:8]}"
    raw = _open_padded(key, sealed, ad(group, SNAP, snap_name(device, first, last)), what)
    signature, payload = raw[:SIG_SIZE], raw[SIG_SIZE:]
    try:
        VerifyKey(public_key).verify(_signed_snap(group, payload), signature)
    except (BadSignatureError, ValueError):
        raise ObjectError(f"{what} are not signed by that device's enrolled key") from None
    doc = _json(payload, what)
    try:
        snap = Snapshot(
            doc["device"],
            int(doc["first"]),
            int(doc["last"]),
            doc["prev"],
            doc["digest"],
            int(doc["hlc"]),
            doc["ops"],
        )
    except (KeyError, ValueError, TypeError):
        raise ObjectError(f"{what} are malformed") from None
    if (snap.device, snap.first, snap.last) != (device, first, last) or not isinstance(
        snap.ops, list
    ):
        raise ObjectError(f"{what} claim to be other changes")
    return snap


def open_segment(
    group: bytes, keyring: Keyring, name: str, public_key: bytes, sealed: bytes
) -> Snapshot:
    """A log entry or a snapshot by its name, as the changes first..last it carries
    (an entry is one change: first = last); ObjectError as open_log/open_snapshot."""
    parsed = parse_segment(name)
    if parsed is None:
        raise ObjectError(f"{name} is not a log object")
    device, first, last = parsed
    if name.startswith("log/"):
        entry, digest = open_log(group, keyring, device, first, public_key, sealed)
        return Snapshot(device, first, first, entry.prev, digest, entry.hlc, entry.ops)
    return open_snapshot(group, keyring, device, first, last, public_key, sealed)


@dataclass(frozen=True)
class Rotation:
    """A change of the group's key (``epoch``) by device ``by``: the devices it
    removes, each with the last change of theirs that still counts, and the new
    key wrapped for every device that stays (X25519 sealed boxes)."""

    epoch: int
    by: str
    removed: dict[str, int]
    wrapped: dict[str, str]
    hlc: int

    def payload(self) -> bytes:
        return canonical(self)


def wrap_for_device(key: bytearray, public_key: bytes) -> str:
    """The key, openable only with the device's signing seed (its X25519 twin)."""
    box = SealedBox(VerifyKey(public_key).to_curve25519_public_key())
    return box.encrypt(bytes(key)).hex()


def unwrap_for_device(wrapped: str, seed: bytes) -> bytearray:
    box = SealedBox(SigningKey(seed).to_curve25519_private_key())
    try:
        return bytearray(box.decrypt(bytes.fromhex(wrapped)))
    except (CryptoError, ValueError):
        raise ObjectError("the new group key given to this device does not open") from None


def seal_rotation(
    group: bytes, old_key: bytearray, new_key: bytearray, signer: SigningKey, rot: Rotation
) -> bytes:
    """Sealed under the key it replaces (every device of the group reads whom it
    removes, a removed device too), and the replaced key under the new one (who
    holds only the new key, a device joining later, reads older objects)."""
    name = epoch_name(rot.epoch)
    payload = rot.payload()
    signature = signer.sign(_DOMAIN + group + b"epoch" + payload).signature
    doc = {
        "body": _seal_padded(old_key, signature + payload, ad(group, EPOCH, name)).hex(),
        "prev": seal(new_key, old_key, ad(group, EPOCH, name, b"prev")).hex(),
    }
    return json.dumps(doc).encode()


def previous_key(group: bytes, key: bytearray, epoch: int, raw: bytes) -> bytearray:
    """The key ``epoch`` replaced, from its rotation object opened with its own key."""
    what = f"change of keys {epoch}"
    try:
        sealed = bytes.fromhex(json.loads(raw)["prev"])
        return open_sealed(key, sealed, ad(group, EPOCH, epoch_name(epoch), b"prev"))
    except (ValueError, KeyError, TypeError, DecryptionError):
        raise ObjectError(f"{what} fails authentication") from None


def open_rotation(
    group: bytes, keyring: Keyring, epoch: int, public_key_of, raw: bytes
) -> Rotation:
    """The rotation, checked: it opens, it is signed by the enrolled device it
    names (``public_key_of(device)``, None if not enrolled)."""
    what = f"change of keys {epoch}"
    try:
        sealed = bytes.fromhex(json.loads(raw)["body"])
    except (ValueError, KeyError, TypeError):
        raise ObjectError(f"{what} is malformed") from None
    plain = _open_padded(keyring, sealed, ad(group, EPOCH, epoch_name(epoch)), what)
    signature, payload = plain[:SIG_SIZE], plain[SIG_SIZE:]
    doc = _json(payload, what)
    try:
        rot = Rotation(
            int(doc["epoch"]),
            doc["by"],
            dict(doc["removed"]),
            dict(doc["wrapped"]),
            int(doc["hlc"]),
        )
    except (KeyError, ValueError, TypeError):
        raise ObjectError(f"{what} is malformed") from None
    public_key = public_key_of(rot.by)
    if rot.epoch != epoch or public_key is None:
        raise ObjectError(f"{what} is not made by an enrolled device")
    try:
        VerifyKey(public_key).verify(_DOMAIN + group + b"epoch" + payload, signature)
    except (BadSignatureError, ValueError):
        raise ObjectError(f"{what} is not signed by the device it names") from None
    return rot


# -- memory versions and their keys ----------------------------------------------------


def seal_body(
    group: bytes, version_key: bytes, memory: str, version: Version, header: dict, content: bytes
) -> bytes:
    """A version's path, kind and content under its own key (no padding: it travels
    inside a padded log object)."""
    head = json.dumps(header, sort_keys=True).encode()
    binding = ad(group, BODY, f"{memory}/{version}")
    return seal(version_key, frame(head) + content, binding)


def open_body(
    group: bytes, version_key: bytes, memory: str, version: Version, sealed: bytes
) -> tuple[dict, bytes]:
    what = f"version {version} of memory {memory[:8]}"
    try:
        plain = bytes(open_sealed(version_key, sealed, ad(group, BODY, f"{memory}/{version}")))
        head = unframe(plain)
    except (DecryptionError, ValueError):
        raise ObjectError(f"{what} fails authentication") from None
    return _json(head, what), plain[4 + len(head) :]


def seal_keys(group: bytes, key: bytearray, name: str, keys: dict[str, bytes]) -> bytes:
    data = json.dumps({v: k.hex() for v, k in sorted(keys.items())}).encode()
    return _seal_padded(key, data, ad(group, KEYS, name))


def open_keys(group: bytes, key: bytearray, name: str, sealed: bytes) -> dict[str, bytes]:
    what = f"key object {name}"
    doc = _json(_open_padded(key, sealed, ad(group, KEYS, name), what), what)
    try:
        return {v: bytes.fromhex(k) for v, k in doc.items()}
    except (AttributeError, ValueError, TypeError):
        raise ObjectError(f"{what} is malformed") from None


def _json(raw: bytes, what: str):
    try:
        return json.loads(raw)
    except ValueError:
        raise ObjectError(f"{what} is malformed") from None
