"""Vault figures for BENCHMARKS.md: put/get latency, unlock, compaction, bytes per memory.

Usage: scripts/bench vault [--sizes 1000,20000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lmdb

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import note, notes  # noqa: E402

from memvault.crypto import DEFAULT_KDF  # noqa: E402
from memvault.vault import Vault  # noqa: E402

PASSPHRASE = b"benchmark passphrase"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:.2f} ms, p95 {pct(values, 0.95) * 1e3:.2f} ms"


def fill(vault: Vault, items, batch: int = 500) -> None:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == batch:
            vault.put_many(chunk)
            chunk = []
    if chunk:
        vault.put_many(chunk)


def bench_size(n: int, workdir: Path) -> None:
    path = workdir / f"bench-{n}.vault"
    rng = random.Random(n)
    print(f"\n## {n:,} memories of 200-2,000 bytes")
    t0 = time.perf_counter()
    with Vault.create(path, PASSPHRASE, compact_delay=None) as vault:
        fill(vault, notes(n, 200, 2000, seed=n))
        fill_s = time.perf_counter() - t0
        payload = sum(m.size for m in vault.walk())
        print(
            f"- fill (batches of 500, includes creating the vault): {fill_s:.1f} s, "
            f"{n / fill_s:,.0f} memories/s"
        )

        put_times = []
        for i in range(300):
            data = note(rng, rng.randint(200, 2000))
            t = time.perf_counter()
            vault.put(f"bench/new-{i}.md", data)
            put_times.append(time.perf_counter() - t)
        print(f"- put one new memory (durable commit): {ms(put_times)}")

        names = [m.path for m in vault.walk() if not m.is_dir]
        get_times = []
        for name in rng.sample(names, 1000):
            t = time.perf_counter()
            vault.get(name)
            get_times.append(time.perf_counter() - t)
        print(f"- get one memory: {ms(get_times)}")

        for name in rng.sample(names, n // 100):
            vault.delete(name)
        t = time.perf_counter()
        vault.compact()
        print(
            f"- compaction after shredding {n // 100} memories: "
            f"{(time.perf_counter() - t) * 1e3:.0f} ms"
        )
        payload = sum(m.size for m in vault.walk())
        count = len(vault)

    size = path.stat().st_size
    print(
        f"- vault file after close: {size / 1e6:.1f} MB, {size / count / 1024:.2f} KiB "
        f"per memory (mean memory {payload / count / 1024:.2f} KiB)"
    )
    for label, drop in (("unlock", False), ("unlock after an unclean exit (no snapshot)", True)):
        open_times, kdf_times = [], []
        for _ in range(3):
            if drop:
                drop_snapshot(path)
            t = time.perf_counter()
            vault = Vault.open(path, PASSPHRASE, readonly=drop, compact_delay=None)
            open_times.append(time.perf_counter() - t)
            kdf_times.append(vault.kdf_seconds)
            vault.close()
        open_s, kdf_s = statistics.median(open_times), statistics.median(kdf_times)
        print(
            f"- {label}: {open_s * 1e3:.0f} ms in all = Argon2id ({DEFAULT_KDF.describe()}) "
            f"{kdf_s * 1e3:.0f} ms + the rest {(open_s - kdf_s) * 1e3:.0f} ms"
        )


def drop_snapshot(path: Path) -> None:
    """Delete the sealed index snapshot, as an unclean exit leaves the vault."""
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=16, map_size=1 << 32)
    with env.begin(write=True) as txn:
        txn.delete(b"snapshot", db=env.open_db(b"state", txn=txn))
    env.close()


def bench_fixed_size(n: int, size: int, workdir: Path) -> None:
    path = workdir / f"fixed-{n}.vault"
    rng = random.Random(1)
    with Vault.create(path, PASSPHRASE, compact_delay=None) as vault:
        fill(vault, ((f"notes/{i:06d}.md", note(rng, size)) for i in range(n)))
        vault.compact()
    total = path.stat().st_size
    print(f"\n## {n:,} memories of exactly {size} bytes")
    print(f"- vault bytes per memory: {total / n:,.0f} bytes ({total / n / 1024:.2f} KiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,20000")
    parser.add_argument("--dir", help="where to create the vaults (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(
            f"# memvault vault benchmark ({time.strftime('%Y-%m-%d')}, "
            f"python {sys.version.split()[0]})"
        )
        for n in (int(x) for x in args.sizes.split(",")):
            bench_size(n, Path(tmp))
        bench_fixed_size(20000, 900, Path(tmp))


if __name__ == "__main__":
    main()
