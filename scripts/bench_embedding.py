"""First-indexing speed for BENCHMARKS.md: how fast a vault's memories are embedded.

The same generated memories (fixed seed, 200-2,000 bytes, as the search
benchmark's) are stored in a fresh vault and embedded from nothing by the
search service's one-shot path, four ways: the float and the int8 model,
each with batches taken oldest first (as before) and of like lengths (as
now). onnxruntime runs on ``--threads`` threads. Chunks per second.

Usage: scripts/bench embedding [--memories 500] [--threads 2]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import note  # noqa: E402

from memvault.crypto import KdfParams  # noqa: E402
from memvault.index import hybrid  # noqa: E402
from memvault.index.embedder import DIMENSIONS, Embedder  # noqa: E402
from memvault.search import SearchService  # noqa: E402
from memvault.vault import Vault  # noqa: E402

FAST_KDF = KdfParams(time_cost=1, memory_kib=8 * 1024, parallelism=1)
WAYS = [  # (label, quantized, length step: one step for all is oldest first)
    ("float, oldest first", False, 1 << 30),
    ("float, like lengths", False, hybrid.LENGTH_STEP),
    ("int8, oldest first", True, 1 << 30),
    ("int8, like lengths", True, hybrid.LENGTH_STEP),
]


def measure(memories: dict[str, bytes], quantized: bool, step: int, threads: int) -> tuple:
    hybrid.LENGTH_STEP = step
    model = Embedder(threads=threads, quantized=quantized)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        path = Path(tmp) / "memory.vault"
        with Vault.create(path, b"benchmark", kdf=FAST_KDF, compact_delay=None) as vault:
            vault.put_many(memories.items())
            service = SearchService(vault, lambda: model, DIMENSIONS)
            service.index_all()
            chunks = len(service.index.pending)
            started = time.perf_counter()
            service.catch_up()
            return chunks, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=500)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(7)
    memories = {
        f"notes/{i:05d}.md": note(rng, rng.randint(200, 2000)) for i in range(args.memories)
    }
    print(f"# memvault first-indexing benchmark ({time.strftime('%Y-%m-%d')})\n")
    print(f"{args.memories} memories, onnxruntime on {args.threads} thread(s).\n")
    print("| model, batches | chunks | seconds | chunks/s | x |")
    print("|---|---|---|---|---|")
    first = None
    for label, quantized, step in WAYS:
        chunks, seconds = measure(memories, quantized, step, args.threads)
        rate = chunks / seconds
        first = first or rate
        print(f"| {label} | {chunks:,} | {seconds:.1f} | {rate:.1f} | {rate / first:.2f}x |")


if __name__ == "__main__":
    main()
