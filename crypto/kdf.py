"""Argon2id passphrase stretching into a wipeable key buffer."""

from __future__ import annotations

from dataclasses import dataclass

from _argon2_cffi_bindings import ffi as _ffi
from _argon2_cffi_bindings import lib as _lib

SALT_SIZE = 16


@dataclass(frozen=True)
class KdfParams:
    """Argon2id cost parameters; ``memory_kib`` is in KiB as in RFC 9106."""

    time_cost: int
    memory_kib: int
    parallelism: int

    def validate(self) -> None:
        if not 1 <= self.time_cost <= 64:
            raise ValueError("Argon2id time cost must be between 1 and 64")
        if not 8 * 1024 <= self.memory_kib <= 16 * 1024 * 1024:
            raise ValueError("Argon2id memory must be between 8 MiB and 16 GiB")
        if not 1 <= self.parallelism <= 16:
            raise ValueError("Argon2id parallelism must be between 1 and 16")

    def describe(self) -> str:
        return f"argon2id t={self.time_cost} m={self.memory_kib // 1024} MiB p={self.parallelism}"

    def as_dict(self) -> dict[str, int]:
        return {"t": self.time_cost, "m": self.memory_kib, "p": self.parallelism}

    @classmethod
    def from_dict(cls, d: dict) -> KdfParams:
        params = cls(int(d["t"]), int(d["m"]), int(d["p"]))
        params.validate()
        return params


# Stronger than RFC 9106's second recommendation (t=3, 64 MiB, p=4): about
# 0.5 s on a 2-core machine, the cost an interactive unlock can afford.
DEFAULT_KDF = KdfParams(time_cost=4, memory_kib=128 * 1024, parallelism=4)


def derive_key(passphrase: bytes | bytearray, salt: bytes, params: KdfParams) -> bytearray:
    """Derive a 32-byte key-encryption key from a passphrase with Argon2id."""
    params.validate()
    if len(salt) != SALT_SIZE:
        raise ValueError("Argon2id salts are 16 bytes")
    out = bytearray(32)
    pwd = _ffi.from_buffer(passphrase) if passphrase else _ffi.NULL
    rc = _lib.argon2_hash(
        params.time_cost,
        params.memory_kib,
        params.parallelism,
        pwd,
        len(passphrase),
        salt,
        len(salt),
        _ffi.from_buffer(out),
        len(out),
        _ffi.NULL,
        0,
        _lib.Argon2_id,
        _lib.ARGON2_VERSION_13,
    )
    if rc != _lib.ARGON2_OK:
        message = _ffi.string(_lib.argon2_error_message(rc)).decode()
        raise MemoryError(f"Argon2id failed: {message}")
    return out
