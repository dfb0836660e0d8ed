"""Search figures for BENCHMARKS.md.

For each size: fill a vault with synthetic technical notes (fixed seed),
embed everything once (vectors are stored in the vault), then measure in
process (hybrid search, vector search alone, embedding a query and a 1 KB
memory) and through a real mount (`cat search/<query>` end to end, storing
one memory until it is searchable, unlock until the first search answers,
the daemon's RSS).

Usage: scripts/bench search [--sizes 1000] [--threads 2] [--keep DIR] [--vault INDEXED_VAULT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import THINGS, TOPICS, note, notes  # noqa: E402

from memvault.fs import control  # noqa: E402
from memvault.index.embedder import DIMENSIONS, Embedder  # noqa: E402
from memvault.search import Query, SearchService  # noqa: E402
from memvault.search.service import GIVE_BACK_AFTER_S  # noqa: E402
from memvault.vault import Vault  # noqa: E402

PASSPHRASE = "benchmark passphrase"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:.2f} ms, p95 {pct(values, 0.95) * 1e3:.2f} ms"


def queries(n: int, seed: int = 9) -> list[str]:
    """``n`` distinct queries (at most 320): none is answered from a cache, and
    the same ones are asked in process and through the mount."""
    rng = random.Random(seed)
    return [f"{topic} {thing}" for topic, thing in rng.sample(list(product(TOPICS, THINGS)), n)]


def fill(vault: Vault, n: int) -> None:
    batch = []
    for item in notes(n, 200, 2000, seed=n):
        batch.append(item)
        if len(batch) == 500:
            vault.put_many(batch)
            batch = []
    if batch:
        vault.put_many(batch)


def bench(n: int, work: Path, threads: int, existing: Path | None = None) -> None:
    """Measure a fresh vault of ``n`` notes, or an ``existing`` one indexed earlier."""
    vault_path = existing or work / f"v{n}" / "memory.vault"
    embedder = Embedder(threads=threads)
    if existing is None:
        vault = Vault.create(vault_path, PASSPHRASE.encode(), compact_delay=None)
        fill(vault, n)
    else:
        vault = Vault.open(vault_path, PASSPHRASE.encode(), compact_delay=None)
    with vault:
        print(f"\n## {len(vault):,} memories")
        service = SearchService(vault, lambda: embedder, DIMENSIONS)
        started = time.perf_counter()
        service.start()
        service.index_all()
        service.wait_idle(timeout=24 * 3600)
        took = time.perf_counter() - started
        chunks = len(service.index)
        if existing is None:
            print(
                f"- first indexing: {chunks:,} chunks in {took:.0f} s "
                f"({chunks / took:.1f} chunks/s, {threads} onnxruntime threads)"
            )
        else:
            print(
                f"- index of {chunks:,} chunks loaded from the vault (the index stored "
                f"at lock with the stored vectors, else rebuilt) in {took:.1f} s"
            )
        print(f"- vector index: {'HNSW' if service.index.vectors.uses_hnsw else 'exact'}")
        qs = queries(200)
        hybrid = []
        for q in qs:
            t = time.perf_counter()
            service.search(Query(q, 10))
            hybrid.append(time.perf_counter() - t)
        print(f"- hybrid search in process (embedding the query included): {ms(hybrid)}")
        vectors = [embedder.embed_one(q) for q in qs]
        vector_times = []
        for v in vectors:
            t = time.perf_counter()
            service.index.vectors.search(v, 10)
            vector_times.append(time.perf_counter() - t)
        print(f"- vector search alone: {ms(vector_times)}")
        if service.index.vectors.uses_hnsw:
            found = 0
            for v in vectors[:50]:
                exact = {i for i, _ in service.index.vectors.exact_search(v, 10)}
                found += len(exact & {i for i, _ in service.index.vectors.search(v, 10)})
            print(f"- HNSW recall@10 against exact search: {found / 500:.3f} (50 queries)")
        single = Embedder(threads=1)
        embed_q, embed_doc = [], []
        rng = random.Random(3)
        for q in qs[:50]:
            t = time.perf_counter()
            single.embed_one(q)
            embed_q.append(time.perf_counter() - t)
        for _ in range(20):
            doc = note(rng, 1024).decode()
            t = time.perf_counter()
            single.embed_one(doc)
            embed_doc.append(time.perf_counter() - t)
        print(f"- embed one query (1 thread): {ms(embed_q)}")
        print(f"- embed one 1 KB memory (1 thread): {ms(embed_doc)}")
        service.stop()
    mounted(vault_path, work, qs)


def daemon_record(work: Path) -> dict:
    """The runtime record (pid, control socket) of the daemon the benchmark started."""
    return json.loads(next((work / "run" / "memvault").glob("*.json")).read_text())


def index_state(work: Path) -> str:
    """The daemon's search index state, asked on its control socket from this
    process: a `memvault status` per poll would start a Python on the cores
    the daemon loads its index with."""
    socket = next((work / "run" / "memvault").glob("*.sock"))
    return control.ask(socket, "status", pid=daemon_record(work)["pid"]).get("search_index", "")


def mounted(vault_path: Path, work: Path, qs: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(
        MEMVAULT_VAULT=str(vault_path),
        MEMVAULT_PASSPHRASE=PASSPHRASE,
        XDG_RUNTIME_DIR=str(work / "run"),
    )
    (work / "run").mkdir(exist_ok=True)
    mnt = work / f"mnt-{vault_path.parent.name}"
    cli = [sys.executable, "-m", "memvault"]
    started = time.perf_counter()
    subprocess.run([*cli, "unlock", str(mnt)], env=env, check=True, capture_output=True)
    mounted_at = time.perf_counter()
    probe = mnt / "search" / f"{qs[0]}?k=1"
    while b"1. **" not in probe.read_bytes():
        time.sleep(0.05)
        probe = mnt / "search" / f"{qs[0]} {time.monotonic()}?k=1"
    ready = time.perf_counter()
    print(
        f"- unlock (default KDF) until mounted: {mounted_at - started:.2f} s; "
        f"until the first search answers: {ready - started:.2f} s"
    )
    try:
        while index_state(work) != "ready":
            time.sleep(0.2)
        loaded = time.perf_counter() - started
        print(
            f"- until the whole index is loaded (status: ready): {loaded:.1f} s; "
            "the figures below are measured then"
        )
        cat = []
        for q in qs[1:]:
            path = mnt / "search" / q
            t = time.perf_counter()
            with open(path, "rb") as f:
                f.read()
            cat.append(time.perf_counter() - t)
        print(f"- `cat search/<query>` end to end through the mount: {ms(cat)}")
        store = []
        for i in range(20):
            token = f"benchtoken{i}x{os.getpid()}"
            t = time.perf_counter()
            (mnt / f"store-{i}.md").write_text(f"# Stored\nA note with {token} inside.\n")
            while token.encode() not in (mnt / "search" / f"{token}?k=1").read_bytes() and (
                f"store-{i}.md".encode() not in (mnt / "search" / f"{token}?k=1").read_bytes()
            ):
                time.sleep(0.001)
            store.append(time.perf_counter() - t)
        print(f"- store one memory through the mount until searchable: {ms(store)}")
        time.sleep(GIVE_BACK_AFTER_S + 1)  # the daemon gives freed memory back in a pause
        pid = daemon_record(work)["pid"]
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        mib = {k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile")}
        print(
            f"- daemon memory, {GIVE_BACK_AFTER_S + 1:.0f} s after the last request: "
            f"RSS {mib['VmRSS']:.0f} MiB = {mib['RssAnon']:.0f} MiB anonymous "
            f"+ {mib['RssFile']:.0f} MiB file pages (libraries, the vault file mapped by LMDB: "
            "page cache the kernel can reclaim)"
        )
    finally:
        subprocess.run([*cli, "lock", str(mnt)], env=env, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--threads", type=int, default=2, help="for the first indexing")
    parser.add_argument(
        "--vault",
        type=Path,
        help="measure this already indexed vault instead "
        f"(passphrase {PASSPHRASE!r}, e.g. kept from an earlier run)",
    )
    parser.add_argument(
        "--keep", type=Path, help="create the vaults here and keep them (DIR/v<size>/memory.vault)"
    )
    args = parser.parse_args()
    print(f"# memvault search benchmark ({time.strftime('%Y-%m-%d')})")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        if args.vault:
            bench(0, work, args.threads, existing=args.vault.resolve())
            return
        for n in (int(x) for x in args.sizes.split(",")):
            bench(n, work, args.threads)


if __name__ == "__main__":
    main()
