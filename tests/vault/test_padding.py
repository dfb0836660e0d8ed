"""What a stored vault file still tells about its memories: only rough sizes.

Regression tests for "sizes and path lengths leak": a sealed value's length
used to give the exact plaintext size and path length, and the record type
and per-record edit counters were readable in the clear.
"""

from __future__ import annotations

import os
import random
import struct

from crypto.aead import seal
from crypto.context import Kind
from memvault.vault import padding, records

from .. import rawvault
from ..conftest import reopen


def test_buckets_cover_and_round_coarsely():
    previous = 0
    for n in [*range(0, 5000), *random.Random(1).sample(range(5000, 1 << 28), 2000)]:
        size = padding.bucket(n)
        assert size >= max(n, padding.SMALL_STEP) and size >= previous
        previous = size if n < 5000 else 0
        if n >= 1024:
            assert size <= n * 1.12 + 1, n  # Padme: at most 12% more
    # Sizes in one bucket are indistinguishable.
    assert padding.bucket(1) == padding.bucket(127) == padding.bucket(128)
    assert padding.bucket(900) == padding.bucket(1000) == 1024


def _stored(vault, path: str) -> bytes:
    return rawvault.record_for(None, vault, path)[1]


def test_sizes_and_path_lengths_leak_only_buckets(vault):
    for n in (0, 1, 37, 100, 127):
        vault.put(f"f{n}.md", os.urandom(n))
    lengths = {len(_stored(vault, f"f{n}.md")) for n in (0, 1, 37, 100, 127)}
    assert len(lengths) == 1, "sizes within one bucket must store alike"
    longer = "a-much-longer-name-that-stays-in-the-same-bucket.md"
    vault.put("a.md", b"x" * 500)
    vault.put(longer, b"x" * 500)
    short, long = _stored(vault, "a.md"), _stored(vault, longer)
    assert len(short) == len(long), "path lengths within one bucket must store alike"
    for path in ("f1.md", "a.md"):
        _, meta, body = records.unpack(_stored(vault, path))
        assert (len(meta) - 40) % padding.SMALL_STEP == 0
        assert (len(body) - 40) % padding.SMALL_STEP == 0


def test_record_type_is_not_readable(vault):
    vault.put("empty.md", b"")
    vault.mkdir("a-dir")
    vault.symlink("link", "empty.md")
    values = [_stored(vault, p) for p in ("empty.md", "a-dir", "link")]
    assert len({len(v) for v in values}) == 1
    assert all(len(records.unpack(v)[2]) > 0 for v in values), "every record has a sealed body"


def test_edit_counts_are_not_readable(vault):
    vault.put("often.md", b"same size content")
    vault.put("once.md", b"same size content")
    for _ in range(30):
        vault.put("often.md", b"same size content")
    often, once = _stored(vault, "often.md"), _stored(vault, "once.md")
    assert len(often) == len(once)
    gen = vault.stat("often.md").gen
    assert gen > 30
    for encoded in (struct.pack(">Q", gen), struct.pack("<Q", gen), struct.pack(">I", gen)):
        assert encoded not in often


def test_derived_values_carry_no_clear_generation(vault):
    vault.put("v.md", b"vectors")
    for _ in range(5):
        vault.put("v.md", b"vectors")
    rid = vault.record_id("v.md")
    gen = vault.stat("v.md").body_gen
    assert vault.put_derived(rid, gen, b"\x01" * 300)
    with vault._store.read() as txn:
        stored = bytes(txn.get(rid, db="derived"))
    assert not stored.startswith(gen.to_bytes(8, "big"))
    assert len(stored) == 40 + 1 + 300, "its exact length: a marker byte, no padding"
    assert vault.get_derived(rid) == b"\x01" * 300


def test_derived_values_sealed_framed_and_padded_before_still_open(vault):
    vault.put("v.md", b"vectors")
    rid, gen = vault.record_id("v.md"), vault.stat("v.md").body_gen
    entry = vault._tree.by_id[rid]
    framed = padding.frame(b"\xf3" * 300)
    ad = vault._sealer.ad(Kind.VECTOR, rid, gen)
    old = seal(entry.data_key, framed, ad, padding.bucket(len(framed)))
    vault._writer.write(lambda txn: txn.put(rid, old, db="derived"), bookkeeping=True)
    assert vault.get_derived(rid) == b"\xf3" * 300


def test_vault_stays_under_2_5_kb_per_0_9_kb_memory(vault_path, vault):
    rng = random.Random(5)
    words = ["deploy", "release", "token", "rotate", "cache", "index", "vault", "agent"]
    for i in range(300):
        text = " ".join(rng.choice(words) for _ in range(200))[:900]
        vault.put(f"notes/{i % 10}/note-{i}.md", text.encode())
    vault.close()
    with reopen(vault_path):
        pass
    per_memory = vault_path.stat().st_size / 300
    assert per_memory < 2500, per_memory


def test_index_snapshot_does_not_show_a_path_length(tmp_path):
    """Forty path lengths, one byte apart: the snapshot shows at most two sizes
    (128-byte steps), not forty."""
    from memvault.vault import Vault

    from ..conftest import FAST_KDF, PASSPHRASE

    sizes = set()
    for length in range(1, 41):
        name = "n" * length + ".md"
        path = tmp_path / str(length) / "memory.vault"
        with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as v:
            v.put("a.md", b"x")
            v.put(name, b"x")
        with rawvault.raw(path) as (txn, dbs):
            sizes.add(len(txn.get(b"snapshot", db=dbs["state"])))
    assert len(sizes) <= 2, sorted(sizes)
