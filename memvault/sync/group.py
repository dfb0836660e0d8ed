"""Starting a sync group, joining one, and what `sync status` shows."""

from __future__ import annotations

import os
import socket

from nacl.signing import SigningKey

from ..crypto.kdf import DEFAULT_KDF, KdfParams
from ..errors import (
    AlreadySynced,
    NoSyncGroup,
    RemoteTampered,
    SyncGroupExists,
    WrongSyncPassphrase,
)
from . import objects
from .engine import CONFLICT_MARK, Sync
from .objects import Device, ObjectError
from .remote import Remote
from .state import SyncState, load, save


def _new_state(
    remote: Remote, config: str | None, group: bytes, key: bytearray, name: str
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
    )


def _enrolment(state: SyncState) -> tuple[str, bytes]:
    public = bytes(SigningKey(state.seed).verify_key)
    device = Device(state.device, state.name, public)
    state.devices[state.device] = device
    return objects.device_name(state.device), objects.seal_device(
        state.group, state.group_key, device
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
) -> SyncState:
    """Make ``vault`` the first device of a new group at ``remote`` (which must hold none)."""
    existing = load(vault)
    if existing is not None:
        raise AlreadySynced(existing.remote)
    if "group" in remote.list():
        raise SyncGroupExists(remote.spec)
    group, key = os.urandom(16), bytearray(os.urandom(32))
    state = _new_state(remote, config, group, key, name or default_device_name())
    uploads = {"group": objects.wrap_group_key(group, key, passphrase, kdf)}
    enrol_name, enrol = _enrolment(state)
    uploads[enrol_name] = enrol
    remote.put_many(uploads)
    save(vault, state)
    return state


def open_group(remote: Remote, passphrase: bytearray) -> tuple[bytes, bytearray]:
    """(group id, group key) of the group at ``remote``, opened with its passphrase."""
    raw = remote.get_many(["group"]).get("group")
    if raw is None:
        raise NoSyncGroup(remote.spec)
    try:
        return objects.unwrap_group_key(raw, passphrase)
    except ObjectError as exc:
        if "passphrase" in str(exc):
            raise WrongSyncPassphrase(remote.spec) from None
        raise RemoteTampered(remote.spec, str(exc)) from None


def join(
    vault,
    remote: Remote,
    opened: tuple[bytes, bytearray],
    *,
    name: str | None = None,
    config: str | None = None,
) -> SyncState:
    """Enrol ``vault`` as a new device of the group at ``remote`` (``opened``: its id
    and key, from open_group); the first sync then fills it."""
    existing = load(vault)
    if existing is not None:
        raise AlreadySynced(existing.remote)
    group, key = opened
    state = _new_state(remote, config, group, key, name or default_device_name())
    taken = _device_names(state, remote)
    wanted, n = state.name, 1
    while state.name in taken:
        n += 1
        state.name = f"{wanted}-{n}"
    enrol_name, enrol = _enrolment(state)
    remote.put_many({enrol_name: enrol})
    save(vault, state)
    return state


def _device_names(state: SyncState, remote: Remote) -> set[str]:
    names = [n for n in remote.list() if n.startswith("devices/")]
    got = remote.get_many(names)
    found = set()
    for name, raw in got.items():
        device = name.split("/", 1)[1]
        try:
            found.add(objects.open_device(state.group, state.group_key, device, raw).name)
        except ObjectError as exc:
            raise RemoteTampered(remote.spec, str(exc)) from None
    return found


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
                "last_change_ms": (seen[2] >> 16) if len(seen) > 2 else None,
            }
        )
    conflicts = sorted(m.path for _, m in vault.walk_records() if CONFLICT_MARK in m.path)
    return {
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
