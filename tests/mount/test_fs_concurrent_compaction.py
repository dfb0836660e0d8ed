"""Housekeeping off the request path: a mount keeps answering while it compacts.

A vault of 20,000 memories is compacted by its daemon (debounced after a
batch of `rm`) while this test reads memories it has not read before (so the
kernel's caches cannot answer) and, once the compaction has started (a
write before would postpone it: it is debounced), writes new ones. The compaction's copy
exists as ``<vault>.compacting`` from start to swap: requests that start and
finish while it exists prove that the daemon answered during the rewrite.
The worst latency is printed, not asserted (the machine is shared).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memvault.vault import Vault

from ..conftest import FAST_KDF, PASSPHRASE
from ..fsutil import make_env, mounted

MEMORIES = 20_000
SHREDS = 200


def _fill(vault_path: Path) -> None:
    filler = os.urandom(600).hex()  # ~1.2 KB, incompressible
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as v:
        for start in range(0, MEMORIES, 2_000):
            v.put_many(
                (f"notes/{i // 1000}/{i}.md", f"memory {i} {filler}".encode())
                for i in range(start, start + 2_000)
            )


def test_requests_complete_during_a_compaction_of_20k_memories(tmp_path):
    _fill(Path(make_env(tmp_path)["MEMVAULT_VAULT"]))
    with mounted(tmp_path, init=False) as m:
        copy = m.vault.with_name(m.vault.name + ".compacting")
        for i in range(SHREDS):  # owes a compaction, run 5 s after the last shred
            os.unlink(m.root / "notes" / str(i // 1000) / f"{i}.md")
        before = os.stat(m.vault).st_ino
        during: list[float] = []  # latencies of requests wholly inside the rewrite
        seen_copy = False
        written = 0
        deadline = time.monotonic() + 120
        i = SHREDS
        while time.monotonic() < deadline:
            in_copy = copy.exists()
            seen_copy = seen_copy or in_copy
            started = time.perf_counter()
            if seen_copy and i % 4 == 0:  # a write before would re-arm the debounce
                (m.root / f"new-{i}.md").write_bytes(b"written during housekeeping")
                written += 1
            else:
                content = (m.root / "notes" / str(i // 1000) / f"{i}.md").read_bytes()
                assert content.startswith(f"memory {i} ".encode())
            elapsed = time.perf_counter() - started
            if in_copy and copy.exists():
                during.append(elapsed)
            i += 1
            if seen_copy and not copy.exists() and os.stat(m.vault).st_ino != before:
                break
            if i >= MEMORIES:
                i = SHREDS
        assert os.stat(m.vault).st_ino != before, "the daemon never compacted"
        assert during, f"no request completed while the compaction ran (copy seen: {seen_copy})"
        print(
            f"\n{len(during)} requests during the compaction; worst {max(during) * 1000:.1f} ms,"
            f" median {sorted(during)[len(during) // 2] * 1000:.2f} ms"
        )
        for j in range(SHREDS, SHREDS + 50):  # nothing lost or mixed up by the swap
            assert (
                (m.root / "notes" / "0" / f"{j}.md")
                .read_bytes()
                .startswith(f"memory {j} ".encode())
            )
        assert not (m.root / "notes" / "0" / "0.md").exists()
    assert m.vault.exists()
