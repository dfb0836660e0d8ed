"""Starting a sync group, joining one, and what `sync status` shows."""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass

from nacl.signing import SigningKey

from .. import paths
from ..crypto.kdf import DEFAULT_KDF, KdfParams
from ..errors import (
    AlreadySynced,
    MemvaultError,
    NoSyncGroup,
    RemoteTampered,
    SyncGroupExists,
    UsageError,
    WrongSyncPassphrase,
)
from . import objects
from .engine import CONFLICT_MARK, SHARED, Scope, Sync
from .objects import Device, ObjectError
from .remote import Remote
from .state import SyncState, load, save

SHARE_KDF = KdfParams(time_cost=1, memory_kib=8 * 1024, parallelism=1)
"""A share code is 192 random bits: stretching it buys nothing, the minimum will do."""


def new_share_code() -> bytearray:
    """A team space's secret, printed once for its members (it opens the group key)."""
    return bytearray(b"mvshare-" + secrets.token_urlsafe(24).encode())


def check_share_name(name: str) -> str:
    """A team space's name: one path component (it is shown at shared/NAME/)."""
    try:
        checked = paths.check_name(name)
    except MemvaultError:
        checked = ""
    if not checked or checked.startswith(".") or "/" in checked:
        raise UsageError(f"A team space's name is one plain name (a directory name): not {name!r}.")
    return checked


def _new_state(
    remote: Remote,
    config: str | None,
    group: bytes,
    key: bytearray,
    name: str,
    share: str | None,
) -> SyncState:
    seed = os.urandom(32)
    return SyncState(
        remote=remote.spec,
        rclone_config=config,
        group=group,
        group_key=key,
        device=os.urandom(16).hex(),
        name=name,
        seed=seed,
        share=share,
    )


def _enrolment(state: SyncState) -> tuple[str, bytes]:
    public = bytes(SigningKey(state.seed).verify_key)
    device = Device(state.device, state.name, public)
    state.devices[state.device] = device
    return objects.device_name(state.device), objects.seal_device(
        state.group, state.newest_key(), device
    )


def default_device_name() -> str:
    return socket.gethostname().split(".")[0] or "device"


def start(
    vault,
    remote: Remote,
    passphrase: bytearray,
    *,
    name: str | None = None,
    config: str | None = None,
    kdf: KdfParams = DEFAULT_KDF,
    share: str | None = None,
) -> SyncState:
    """Make ``vault`` the first device of a new group at ``remote`` (which must hold
    none): the personal group, or the team space ``share``."""
    _not_in_one_yet(vault, share)
    if "group" in remote.list():
        raise SyncGroupExists(remote.spec)
    group, key = os.urandom(16), bytearray(os.urandom(32))
    state = _new_state(remote, config, group, key, name or default_device_name(), share)
    uploads = {"group": objects.wrap_group_key(group, key, passphrase, kdf)}
    enrol_name, enrol = _enrolment(state)
    uploads[enrol_name] = enrol
    remote.put_many(uploads)
    save(vault, state)
    return state


@dataclass
class Opened:
    """A group opened with its passphrase: its id, its first key, and the keys of
    its later epochs (a device joining reads every epoch's objects)."""

    group: bytes
    key: bytearray
    later: dict[str, str]


def open_group(remote: Remote, passphrase: bytearray) -> Opened:
    """The group at ``remote``, opened with its passphrase: the newest epoch's
    key object, then each epoch's rotation gives the key before it."""
    listing = remote.list()
    epochs = [int(n[7:]) for n in listing if n.startswith("groups/") and n[7:].isdigit()]
    newest = max(epochs, default=0)
    names = [objects.groups_name(newest)] + [objects.epoch_name(e) for e in range(1, newest + 1)]
    got = remote.get_many(names)
    raw = got.get(objects.groups_name(newest))
    if raw is None:
        raise NoSyncGroup(remote.spec)
    try:
        group, key = objects.unwrap_group_key(raw, passphrase, newest)
        keys = {newest: key}
        for epoch in range(newest, 0, -1):
            rotation = got.get(objects.epoch_name(epoch))
            if rotation is None:
                raise ObjectError(f"change of keys {epoch} is missing")
            keys[epoch - 1] = objects.previous_key(group, keys[epoch], epoch, rotation)
    except ObjectError as exc:
        if "passphrase" in str(exc):
            raise WrongSyncPassphrase(remote.spec) from None
        raise RemoteTampered(remote.spec, str(exc)) from None
    later = {str(e): bytes(k).hex() for e, k in keys.items() if e}
    return Opened(group, keys[0], later)


def join(
    vault,
    remote: Remote,
    opened: Opened,
    *,
    name: str | None = None,
    config: str | None = None,
    share: str | None = None,
) -> SyncState:
    """Enrol ``vault`` as a new device of the group at ``remote`` (``opened``: its id
    and key, from open_group); the first sync then fills it."""
    _not_in_one_yet(vault, share)
    state = _new_state(
        remote, config, opened.group, opened.key, name or default_device_name(), share
    )
    state.later_keys = dict(opened.later)
    taken = _device_names(state, remote)
    wanted, n = state.name, 1
    while state.name in taken:
        n += 1
        state.name = f"{wanted}-{n}"
    enrol_name, enrol = _enrolment(state)
    remote.put_many({enrol_name: enrol})
    save(vault, state)
    return state


def _not_in_one_yet(vault, share: str | None) -> None:
    existing = load(vault, share)
    if existing is not None:
        raise AlreadySynced(existing.remote)
    if share is not None and vault.exists(f"{SHARED}/{share}"):
        raise UsageError(
            f"shared/{share} already exists in this vault: choose another name for the space."
        )


def _device_names(state: SyncState, remote: Remote) -> set[str]:
    names = [n for n in remote.list() if n.startswith("devices/")]
    got = remote.get_many(names)
    found = set()
    for name, raw in got.items():
        device = name.split("/", 1)[1]
        try:
            found.add(objects.open_device(state.group, state.keyring(), device, raw).name)
        except ObjectError as exc:
            raise RemoteTampered(remote.spec, str(exc)) from None
    return found


def remove_device(
    vault, remote: Remote, state: SyncState, name: str, passphrase: bytearray, kdf: KdfParams
) -> str:
    """Remove the device (or team member) ``name`` from the group: a new group key,
    given to every other device in a sealed box and wrapped under ``passphrase``
    (a new one, if the removed device's owner knows the old) for devices that join
    later. The removed device's changes up to the last this device saw still
    count; none after. Returns the removed device's id."""
    active = {d: dev for d, dev in state.devices.items() if d not in state.removed}
    found = [d for d, dev in active.items() if dev.name == name]
    if not found:
        names = ", ".join(sorted(dev.name for dev in active.values()))
        raise UsageError(f"No device named {name!r} in this group (its devices: {names}).")
    target = found[0]
    if target == state.device:
        raise UsageError("A device cannot remove itself: remove it from another device.")
    epoch = state.epoch + 1
    if objects.epoch_name(epoch) in remote.list():
        raise UsageError("Another device changed the group's key meanwhile: sync, then try again.")
    key = bytearray(os.urandom(32))
    rotation = objects.Rotation(
        epoch=epoch,
        by=state.device,
        removed={target: state.seen.get(target, [0])[0]},
        wrapped={
            d: objects.wrap_for_device(key, dev.public_key)
            for d, dev in active.items()
            if d != target
        },
        hlc=state.tick(time.time_ns() // 1_000_000),
    )
    signer = SigningKey(state.seed)
    remote.put_many(
        {
            objects.epoch_name(epoch): objects.seal_rotation(
                state.group, state.group_key, key, signer, rotation
            ),
            objects.groups_name(epoch): objects.wrap_group_key(
                state.group, key, passphrase, kdf, epoch
            ),
        }
    )
    state.old_keys[str(state.epoch)] = bytes(state.group_key).hex()
    state.group_key, state.epoch = key, epoch
    state.removed.update(rotation.removed)
    state.members[str(epoch)] = sorted(rotation.wrapped)
    state.forget_after_removal()
    save(vault, state)
    return target


def status(vault, state: SyncState) -> dict:
    """Devices, how far each has been seen, conflict copies here, and the local
    changes the next sync will send (counted, nothing sent)."""
    devices = []
    for device, enrolled in sorted(state.devices.items(), key=lambda kv: kv[1].name):
        seen = state.seen.get(device, [0, "", 0])
        devices.append(
            {
                "name": enrolled.name,
                "id": device[:16],
                "this": device == state.device,
                "changes": seen[0],
                "removed": device in state.removed,
                "last_change_ms": (seen[2] >> 16) if len(seen) > 2 else None,
            }
        )
    scope = Scope.of(state)
    conflicts = sorted(
        m.path
        for _, m in vault.walk_records()
        if CONFLICT_MARK in m.path and scope.remote(m.path) is not None
    )
    return {
        "share": state.share,
        "remote": state.remote,
        "device": state.name,
        "devices": devices,
        "pending": pending_changes(vault, state),
        "conflicts": conflicts,
    }


def pending_changes(vault, state: SyncState) -> int:
    """How many changes the next sync would send (a dry run of its scan)."""
    dry = Sync(vault, SyncState.decode(state.encode()), _Nowhere())
    dry.push(upload=False)
    return dry.report.pushed


class _Nowhere:
    spec = "nowhere"
