"""SIGKILL in the middle of a batch of puts: the vault opens, and every put
that had returned is intact."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from memvault.vault import Vault

from ..conftest import FAST_KDF, PASSPHRASE, reopen

WRITER = textwrap.dedent(
    """
    import sys
    from memvault.vault import Vault
    vault = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=0.01)
    i = 0
    while True:
        name = f"batch/{i % 50}.md"
        vault.put(name, f"put number {i} ".encode() * (1 + i % 300))
        if i % 9 == 4:
            vault.delete(name)  # shreds make the writer compact in the background
            print(f"DEL {i}", flush=True)
        else:
            print(f"PUT {i}", flush=True)
        i += 1
    """
)


def expected_content(i: int) -> bytes:
    return f"put number {i} ".encode() * (1 + i % 300)


@pytest.mark.parametrize("kill_after", [5, 60, 233])
def test_sigkill_mid_batch_keeps_every_returned_put(vault_path, kill_after):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(vault_path), PASSPHRASE.decode()],
        stdout=subprocess.PIPE,
    )
    done: dict[str, int | None] = {}
    try:
        for _ in range(kill_after):
            line = proc.stdout.readline().decode().split()
            assert line, "the writer died on its own"
            op, i = line[0], int(line[1])
            done[f"batch/{i % 50}.md"] = None if op == "DEL" else i
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # The writer runs ahead of what was read: operations after the last line
    # read may or may not have committed. A later put to the same name may
    # have replaced the content, a later delete (every i with i % 9 == 4) may
    # have removed it; nothing else may.
    with reopen(vault_path) as vault:
        assert vault.damaged == {}
        for name, i in done.items():
            if i is None:
                continue
            later = [j for j in range(i + 1, i + 60) if j % 50 == i % 50]
            if not vault.exists(name):
                assert any(j % 9 == 4 for j in later), f"{name}: put {i} lost"
                continue
            data = vault.get(name)
            assert any(data == expected_content(j) for j in [i, *later]), name
        vault.put("after/crash.md", b"still writable")
    assert not vault_path.with_name(vault_path.name + ".compacting").exists()
