"""Argon2id passphrase stretching into a wipeable key buffer."""

from __future__ import annotations

from dataclasses import dataclass

from _argon2_cffi_bindings import ffi as _ffi
from _argon2_cffi_bindings import lib as _lib

SALT_SIZE = 16

# One set of limits for what `init` may write and what an unlock will run. A
# keyslot's parameters are unauthenticated until Argon2id has run, so these
# also bound what a forged slot can make an unlock spend (about 30 s and
# 2 GiB at the top, against 0.5 s and 128 MiB for the default).
MIN_TIME_COST, MAX_TIME_COST = 1, 16
MIN_MEMORY_KIB, MAX_MEMORY_KIB = 8 * 1024, 2 * 1024 * 1024
MIN_PARALLELISM, MAX_PARALLELISM = 1, 16


@dataclass(frozen=True)
class KdfParams:
    """Argon2id cost parameters; ``memory_kib`` is in KiB as in RFC 9106."""

    time_cost: int
    memory_kib: int
    parallelism: int

    def validate(self) -> None:
        """Raise ValueError unless the cost is within the limits above."""
        if not MIN_TIME_COST <= self.time_cost <= MAX_TIME_COST:
            raise ValueError(
                f"Argon2id time cost must be between {MIN_TIME_COST} and {MAX_TIME_COST}"
            )
        if not MIN_MEMORY_KIB <= self.memory_kib <= MAX_MEMORY_KIB:
            raise ValueError(
                f"Argon2id memory must be between {MIN_MEMORY_KIB // 1024} MiB "
                f"and {MAX_MEMORY_KIB // 1024} MiB"
            )
        if not MIN_PARALLELISM <= self.parallelism <= MAX_PARALLELISM:
            raise ValueError(
                f"Argon2id parallelism must be between {MIN_PARALLELISM} and {MAX_PARALLELISM}"
            )

    @staticmethod
    def limits() -> str:
        return (
            f"at most t={MAX_TIME_COST} m={MAX_MEMORY_KIB // 1024} MiB p={MAX_PARALLELISM}, "
            f"at least m={MIN_MEMORY_KIB // 1024} MiB"
        )

    def describe(self) -> str:
        return f"argon2id t={self.time_cost} m={self.memory_kib // 1024} MiB p={self.parallelism}"

    def as_dict(self) -> dict[str, int]:
        return {"t": self.time_cost, "m": self.memory_kib, "p": self.parallelism}

    @classmethod
    def from_dict(cls, d: dict) -> KdfParams:
        """Parse only: whether the cost is acceptable is for validate() to say,
        so that an unlock can name an unreasonable slot instead of calling it damaged."""
        return cls(int(d["t"]), int(d["m"]), int(d["p"]))


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
