"""Signed copies of a locked vault file: `<file>.sig`, checked without the passphrase.

A signature is Ed25519 (PyNaCl) over a small statement: the file's size and
BLAKE2b-256 digest, the vault's id, its generation (rollback.py) and the
time of signing. The signing key is the vault's own, sealed inside it
(Vault.signing_seed); what a verifier trusts is the public key's
fingerprint, given with ``--key`` or remembered by this machine when it
signed with that key (``$XDG_STATE_HOME/memvault/signers.json``). The public
key inside a `.sig` file proves nothing by itself: anyone can sign with a
key of their own, so a signature by a key nobody vouched for is reported as
unknown, never as valid.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from .crypto import wipe
from .errors import EXIT_DAMAGED, MemvaultError, UsageError
from .vault.rollback import state_dir

FORMAT = "memvault-signature-1"
SUFFIX = ".sig"
_DOMAIN = b"memvault signed copy\n"
_READ = 1 << 20


class SignatureInvalid(MemvaultError):
    """{0} does not match its signature {1}: {2}."""

    exit_code = EXIT_DAMAGED


class SignerUnknown(MemvaultError):
    """{0} is signed by a key this machine does not know ({1}): the signature is intact, \
but anyone can sign with a key of their own. If you know that fingerprint (`memvault status` \
shows the vault's), check again with --key {1}."""

    exit_code = EXIT_DAMAGED


def fingerprint(public_key: bytes) -> str:
    """A short, typeable name for a public key: BLAKE2b-128 in groups of four hex digits."""
    digest = hashlib.blake2b(public_key, digest_size=16, person=b"memvault-signer").hexdigest()
    return "-".join(digest[i : i + 4] for i in range(0, len(digest), 4))


def normalize_fingerprint(text: str) -> str:
    """A fingerprint as typed (any case, with or without dashes), in its shown form."""
    digits = text.strip().lower().replace("-", "").replace(":", "")
    if len(digits) != 32 or any(c not in "0123456789abcdef" for c in digits):
        raise UsageError(f"--key {text!r} is not a key fingerprint (32 hex digits).")
    return "-".join(digits[i : i + 4] for i in range(0, 32, 4))


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


@dataclass(frozen=True)
class Statement:
    """What is signed: this file, of this vault, at this generation, at this time."""

    vault_id: str
    generation: int
    signed_at: str
    size: int
    blake2b: str

    def encode(self) -> bytes:
        return _DOMAIN + json.dumps(asdict(self), sort_keys=True).encode()


def digest_file(path: Path) -> tuple[int, str]:
    """The file's size and BLAKE2b-256 digest, read in 1 MiB pieces."""
    h = hashlib.blake2b(digest_size=32)
    size = 0
    with open(path, "rb") as f:
        while piece := f.read(_READ):
            h.update(piece)
            size += len(piece)
    return size, h.hexdigest()


def sign_file(path: Path, seed: bytes | bytearray, vault_id: bytes, generation: int) -> str:
    """Write ``<path>.sig`` (atomically, 0600) for the file as it is now; return the
    key's fingerprint."""
    key = SigningKey(bytes(seed))
    size, digest = digest_file(path)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    statement = Statement(vault_id.hex(), generation, stamp, size, digest)
    public = bytes(key.verify_key)
    doc = {
        "format": FORMAT,
        **asdict(statement),
        "public_key": public.hex(),
        "signature": key.sign(statement.encode()).signature.hex(),
    }
    _write_private(signature_path(path), json.dumps(doc, indent=1).encode() + b"\n")
    return fingerprint(public)


def fingerprint_of(seed: bytes | bytearray) -> str:
    return fingerprint(bytes(SigningKey(bytes(seed)).verify_key))


def sign_and_wipe(path: Path, seed: bytearray, vault_id: bytes, generation: int) -> dict:
    """sign_file, the key remembered as this machine's for the vault, the seed
    wiped; what the CLI reports of it."""
    try:
        found = sign_file(path, seed, vault_id, generation)
    finally:
        wipe(seed)
    trust(found, vault_id.hex())
    return {"signature": str(signature_path(path)), "fingerprint": found, "generation": generation}


def backup(vault, dest: Path, *, sign: bool) -> dict:
    """Vault.backup to ``dest`` (recorded in the audit trail), signed if asked;
    what the CLI reports of it. The daemon and the CLI both back up through this."""
    seed = vault.signing_seed(create=True) if sign else None
    vault.note("backup", f"to {dest}")
    generation = vault.backup(dest)
    result: dict = {"generation": generation}
    if seed is not None:
        result |= sign_and_wipe(dest, seed, vault.header.vault_id, generation)
    return result


@dataclass(frozen=True)
class Verified:
    statement: Statement
    fingerprint: str
    trusted_by: str  # "--key" or "this machine"


def verify_signature(path: Path, key: str | None = None) -> Verified:
    """Check ``<path>.sig`` over the file as it is now (no passphrase needed).

    Raises SignatureInvalid (the file or the signature changed, or the file is
    not what the signature names) or SignerUnknown (an intact signature by a
    key neither given nor remembered here for that vault).
    """
    sig_path = signature_path(path)
    try:
        doc = json.loads(sig_path.read_bytes())
        statement = Statement(
            str(doc["vault_id"]),
            int(doc["generation"]),
            str(doc["signed_at"]),
            int(doc["size"]),
            str(doc["blake2b"]),
        )
        public = bytes.fromhex(doc["public_key"])
        signature = bytes.fromhex(doc["signature"])
        if doc.get("format") != FORMAT:
            raise ValueError("format")
        VerifyKey(public).verify(statement.encode(), signature)
    except BadSignatureError:
        raise SignatureInvalid(path, sig_path, "the signature itself was altered") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = (
            "it is not a memvault signature file" if not isinstance(exc, OSError) else "unreadable"
        )
        raise SignatureInvalid(path, sig_path, why) from None
    size, digest = digest_file(path)
    if (size, digest) != (statement.size, statement.blake2b):
        raise SignatureInvalid(path, sig_path, "the file changed after it was signed")
    found = fingerprint(public)
    if key is not None:
        if normalize_fingerprint(key) != found:
            raise SignerUnknown(path, found)
        return Verified(statement, found, "--key")
    if trusted_signers().get(found) != statement.vault_id:
        raise SignerUnknown(path, found)
    return Verified(statement, found, "this machine")


# -- keys this machine signed with ----------------------------------------------------


def _signers_path() -> Path:
    return state_dir() / "signers.json"


def trusted_signers() -> dict[str, str]:
    """Fingerprint -> vault id, for every key this machine signed with."""
    try:
        doc = json.loads(_signers_path().read_text())
        return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def signer_of(vault_id: bytes) -> str | None:
    """The fingerprint of the key this machine signed the vault with, if any."""
    for found, vid in trusted_signers().items():
        if vid == vault_id.hex():
            return found
    return None


def trust(found: str, vault_id_hex: str) -> None:
    signers = trusted_signers()
    if signers.get(found) != vault_id_hex:
        signers[found] = vault_id_hex
        path = _signers_path()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_private(path, json.dumps(signers, indent=1).encode())


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` durably and atomically, readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
