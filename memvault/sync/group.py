"""Starting a sync group, joining one, and what `sync status` shows."""

from __future__ import annotations

import os
import secrets
import socket

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
    share: str | None = None,
) -> SyncState:
    """Enrol ``vault`` as a new device of the group at ``remote`` (``opened``: its id
    and key, from open_group); the first sync then fills it."""
    _not_in_one_yet(vault, share)
    group, key = opened
    state = _new_state(remote, config, group, key, name or default_device_name(), share)
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
