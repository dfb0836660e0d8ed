"""One key change (passwd, keyslot add/remove, 2fa, recovery) as the CLI asks it,
done the same way in process on a locked vault and by the mount daemon on an
unlocked one: the daemon is then the only writer, and it checks the secret
against its own keyslots before changing them.

Secrets travel to the daemon only over its control socket (0600, same uid,
fs/control.py), hex-encoded in the request; never in argv.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .crypto import KdfParams, wipe
from .crypto.kdf import DEFAULT_KDF
from .crypto.keyslot import Keyslot
from .errors import UsageError
from .vault import keyslots
from .vault.keyslots import Factors

ACTIONS = (
    "passwd",
    "add",
    "remove",
    "2fa-enable",
    "2fa-disable",
    "recovery-enable",
    "recovery-disable",
)


@dataclass
class KeyRequest:
    action: str
    secret: bytearray
    """The current passphrase, or the recovery key's bytes (``factors.recovery``)."""
    factors: Factors = field(default_factory=Factors)
    new_secret: bytearray | None = None
    kdf: KdfParams | None = None
    """None: the defaults (passwd, add, recovery) or the slot's own (2fa)."""
    slot: int | None = None
    """remove: the slot to remove; passwd: the slot to replace (else the one opened)."""
    new_keyfile: bytes | None = None
    """2fa-enable: the hash of the keyfile the slot will need."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "secret": self.secret.hex(),
            "keyfile": self.factors.keyfile.hex() if self.factors.keyfile else None,
            "keyfile_name": self.factors.keyfile_name,
            "recovery": self.factors.recovery,
            "new_secret": self.new_secret.hex() if self.new_secret is not None else None,
            "kdf": self.kdf.as_dict() if self.kdf else None,
            "slot": self.slot,
            "new_keyfile": self.new_keyfile.hex() if self.new_keyfile else None,
        }

    @classmethod
    def from_wire(cls, message: dict[str, Any]) -> KeyRequest:
        """ValueError, KeyError or TypeError for a request that is not one."""

        def raw(name: str) -> bytes | None:
            value = message.get(name)
            return None if value is None else bytes.fromhex(value)

        action = message["action"]
        if action not in ACTIONS:
            raise ValueError(f"unknown key action {action!r}")
        new_secret = raw("new_secret")
        slot = message.get("slot")
        kdf = KdfParams.from_dict(message["kdf"]) if message.get("kdf") else None
        if kdf is not None:
            kdf.validate()  # as the CLI did: anything else is not a request it sent
        return cls(
            action,
            bytearray(bytes.fromhex(message["secret"])),
            Factors(
                raw("keyfile"), str(message.get("keyfile_name", "")), bool(message["recovery"])
            ),
            None if new_secret is None else bytearray(new_secret),
            kdf,
            None if slot is None else int(slot),
            raw("new_keyfile"),
        )

    def wipe(self) -> None:
        wipe(self.secret)
        wipe(self.new_secret)


def perform(vault, request: KeyRequest, opened: Keyslot) -> dict[str, Any]:
    """Make the change on an unlocked vault whose slot ``opened`` the request's
    secret opened (recorded in the audit trail); return what the CLI reports."""
    done = _perform(vault, request, opened)
    slot = done.get("slot", done.get("slots"))
    vault.note("keyslot", f"{request.action}" + (f" slot {slot}" if slot is not None else ""))
    return done


def _perform(vault, request: KeyRequest, opened: Keyslot) -> dict[str, Any]:
    kdf = request.kdf or DEFAULT_KDF
    action = request.action
    if action == "passwd":
        was = {s.index: s.kind for s in vault.slots}
        slot = keyslots.passwd(
            vault, opened, _new(request), kdf, request.factors.keyfile, request.slot
        )
        return {"slot": slot.index, "kind": slot.kind, "was": was.get(slot.index)}
    if action == "add":
        return {"slot": keyslots.add(vault, _new(request), kdf).index}
    if action == "remove":
        if request.slot is None:
            raise ValueError("remove needs a slot")
        keyslots.remove(vault, opened, request.slot)
        return {"slot": request.slot}
    if action == "2fa-enable":
        if request.new_keyfile is None:
            raise ValueError("2fa-enable needs a keyfile")
        slot, plain = keyslots.enable_2fa(
            vault, opened, request.secret, request.new_keyfile, request.kdf or opened.kdf
        )
        return {"slot": slot.index, "plain": [s.index for s in plain]}
    if action == "2fa-disable":
        slot = keyslots.disable_2fa(vault, opened, request.secret, request.kdf or opened.kdf)
        return {"slot": slot.index}
    if action == "recovery-enable":
        slot, printed = keyslots.enable_recovery(vault, kdf)
        return {"slot": slot.index, "recovery_key": printed}
    return {"slots": keyslots.disable_recovery(vault)}


def serve(vault, message: dict[str, Any]) -> dict[str, Any]:
    """The mount daemon's answer to a `keys` request (in a worker thread)."""
    try:
        request = KeyRequest.from_wire(message)
    except (ValueError, KeyError, TypeError):
        raise UsageError("The key request to the daemon was not one it understands.") from None
    try:
        opened = keyslots.authenticate(vault, bytearray(request.secret), request.factors)
        return perform(vault, request, opened)
    finally:
        request.wipe()


def _new(request: KeyRequest) -> bytearray:
    if not request.new_secret:
        raise ValueError(f"{request.action} needs a new passphrase")
    return request.new_secret
