"""Issue 9: a keyslot's KDF parameters are unauthenticated until unlock, so
`status` says so and an unlock refuses an unreasonable cost before Argon2id."""

from __future__ import annotations

import pytest

from memvault import errors
from memvault.crypto import KdfParams, kdf

from .. import rawvault
from ..conftest import assert_one_line_error, reopen, run_cli


def _forge_slot(vault_path, **params) -> None:
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        stored = bytes(txn.get(bytes([0]), db=dbs["slots"]))
        forged = rawvault.edit_json(stored, lambda d: d["params"].update(params))
        txn.put(bytes([0]), forged, db=dbs["slots"])


def test_status_marks_kdf_parameters_unverified(vault_path, vault):
    vault.close()
    out = run_cli("status", vault=vault_path, passphrase=None)
    assert out.returncode == 0, out.stderr
    assert "slot 0: argon2id t=1 m=8 MiB p=1 (unverified until unlock)" in out.stdout.decode()


def test_forged_keyslot_with_unreasonable_kdf_cost_is_refused_before_argon2(vault_path, vault):
    vault.close()
    _forge_slot(vault_path, t=64)  # the old limits ran 64 passes, then said "wrong passphrase"
    with pytest.raises(errors.UnreasonableKdf, match="Keyslot 0 asks for an unreasonable KDF"):
        reopen(vault_path)
    line = assert_one_line_error(run_cli("ls", vault=vault_path))
    assert "t=64" in line and "may have been tampered with" in line, line
    status = run_cli("status", vault=vault_path, passphrase=None).stdout.decode()
    assert "t=64" in status and "unlock will refuse it" in status, status


@pytest.mark.parametrize(
    "t,m,p", [(17, 8 * 1024, 1), (1, 4 * 1024 * 1024, 1), (1, 8192, 17), (1, 8192, 0), (0, 8192, 1)]
)
def test_one_set_of_kdf_limits_for_init_and_unlock(vault_path, t, m, p):
    with pytest.raises(ValueError):
        KdfParams(t, m, p).validate()
    args = ["--kdf-time", str(t), "--kdf-memory", str(m // 1024), "--kdf-parallelism", str(p)]
    assert "between" in assert_one_line_error(run_cli("init", *args, vault=vault_path))
    assert not vault_path.exists()
    top = KdfParams(kdf.MAX_TIME_COST, kdf.MAX_MEMORY_KIB, kdf.MAX_PARALLELISM)
    top.validate()  # the most `init` can write is what an unlock accepts
