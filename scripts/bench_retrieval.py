"""Retrieval quality for BENCHMARKS.md: the LoCoMo development set through a
real mount (`cat search/<question>?k=10&in=locomo/<conversation>.json`), at
turn level (one file per dialog turn) and session level (one file per
session), as ../shared/eval/locomo-dev/README.md writes the task down.

Prints R@5, R@10 and nDCG@10 over the distinct files returned, per category
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; all = 1-4) and, for
the adversarial questions (5), how often the answer is "nothing relevant".

The data is read from the shared folder, never copied into the repository.
`--vault DIR` keeps the vaults (and their stored vectors) between runs, so a
ranking change is measured without embedding everything again;
`--in-process` asks the search service directly (the same ranking, no mount:
quicker while tuning, not the figure to report).

Usage: scripts/bench retrieval [--level turn|session|both] [--vault DIR] [--in-process]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from memvault import paths
from memvault.crypto import KdfParams
from memvault.search import Query, parse
from memvault.vault import Vault

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "eval" / "locomo-dev" / "locomo-dev.json"
PASSPHRASE = "retrieval benchmark"
BENCH_KDF = KdfParams(1, 8 * 1024, 1)  # the KDF is not what this measures
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
K = 10


# -- the task -------------------------------------------------------------------------


def turn_id(raw: str) -> str | None:
    """'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5'; None for what names no turn."""
    found = re.fullmatch(r"D:?(\d+):0*(\d+)", raw.strip())
    return f"D{int(found[1])}:{int(found[2])}" if found else None


def sessions(conversation: dict) -> list[tuple[int, str, list[dict]]]:
    out = []
    for key, turns in conversation.items():
        found = re.fullmatch(r"session_(\d+)", key)
        if found and isinstance(turns, list):
            number = int(found[1])
            out.append((number, conversation.get(f"session_{number}_date_time", ""), turns))
    return sorted(out)


def turn_line(date: str, turn: dict) -> str:
    line = f"[{date}] {turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        line += f" [shares a photo: {turn['blip_caption']}]"
    return line


def documents(sample: dict, level: str) -> dict[str, str]:
    """Vault path -> Markdown of one conversation's documents."""
    sid = sample["sample_id"]
    docs = {}
    for number, date, turns in sessions(sample["conversation"]):
        if level == "turn":
            for turn in turns:
                name = turn["dia_id"].replace(":", "_")
                docs[f"locomo/{sid}/{name}.md"] = turn_line(date, turn) + "\n"
        else:
            lines = [f"Session {number} ({date})", ""] + [turn_line(date, t) for t in turns]
            docs[f"locomo/{sid}/session_{number}.md"] = "\n".join(lines) + "\n"
    return docs


def relevant(sample: dict, question: dict, level: str) -> set[str]:
    sid = sample["sample_id"]
    known = {t["dia_id"] for _, _, ts in sessions(sample["conversation"]) for t in ts}
    ids = set()
    for raw in question.get("evidence", []):
        for part in str(raw).split(";"):
            tid = turn_id(part)
            if tid in known:
                ids.add(tid)
    if level == "turn":
        return {f"locomo/{sid}/{tid.replace(':', '_')}.md" for tid in ids}
    return {f"locomo/{sid}/session_{tid[1:].split(':')[0]}.md" for tid in ids}


def query_for(text: str, sid: str) -> Query:
    """The question as a search/ file name (words dropped from the end if too long)."""
    words = text.split()
    while True:
        query = Query(" ".join(words), K, f"locomo/{sid}", as_json=True)
        if len(query.file_name().encode()) <= paths.MAX_NAME_BYTES or len(words) == 1:
            return query
        words = words[:-1]


# -- the metric -----------------------------------------------------------------------


def scores(ranked: list[str], wanted: set[str]) -> dict[str, float]:
    distinct = list(dict.fromkeys(ranked))[:K]
    hits = [p in wanted for p in distinct]
    dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(hits) if h)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(wanted), K)))
    return {
        "R@5": sum(hits[:5]) / len(wanted),
        "R@10": sum(hits) / len(wanted),
        "nDCG@10": dcg / ideal,
    }


# -- asking ---------------------------------------------------------------------------


def prepare(vault_path: Path, data: list[dict], level: str) -> None:
    if vault_path.exists():
        return
    vault_path.parent.mkdir(parents=True, exist_ok=True)
    with Vault.create(vault_path, PASSPHRASE.encode(), kdf=BENCH_KDF, compact_delay=None) as v:
        for sample in data:
            v.put_many((path, text.encode()) for path, text in documents(sample, level).items())


class Mounted:
    def __init__(self, vault_path: Path, work: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
        self.env.update(
            MEMVAULT_VAULT=str(vault_path),
            MEMVAULT_PASSPHRASE=PASSPHRASE,
            XDG_RUNTIME_DIR=str(work / "run"),
        )
        (work / "run").mkdir(mode=0o700, exist_ok=True)
        self.mnt = work / "mnt"
        self.cli = [sys.executable, "-m", "memvault"]

    def __enter__(self) -> Mounted:
        subprocess.run([*self.cli, "unlock", str(self.mnt)], env=self.env, check=True)
        started = time.monotonic()
        while (state := self._index_state()) != "ready":
            waited = time.monotonic() - started
            print(f"\r  index: {state} ({waited:.0f} s)", end="", file=sys.stderr)
            time.sleep(2)
        print(file=sys.stderr)
        return self

    def _index_state(self) -> str:
        done = subprocess.run(
            [*self.cli, "status", "--json"], env=self.env, check=True, capture_output=True
        )
        return json.loads(done.stdout).get("daemon", {}).get("search_index", "")

    def ask(self, query: Query) -> list[str]:
        doc = json.loads((self.mnt / "search" / query.file_name()).read_bytes())
        return [r["path"] for r in doc["results"]]

    def __exit__(self, *exc) -> None:
        subprocess.run([*self.cli, "lock", str(self.mnt)], env=self.env, capture_output=True)


class InProcess:
    def __init__(self, vault_path: Path, work: Path) -> None:
        self.vault_path = vault_path

    def __enter__(self) -> InProcess:
        from memvault.search import open_search

        self.vault = Vault.open(self.vault_path, PASSPHRASE.encode(), compact_delay=None)
        self.service = open_search(self.vault, threads=2)
        self.service.catch_up()
        return self

    def ask(self, query: Query) -> list[str]:
        return [r.path for r in self.service.search(parse(query.file_name()))]

    def __exit__(self, *exc) -> None:
        self.vault.close()


def measure(data: list[dict], level: str, work: Path, in_process: bool) -> None:
    vault_path = work / level / "memory.vault"
    prepare(vault_path, data, level)
    per_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    adversarial_empty, adversarial = 0, 0
    latencies = []
    asker = InProcess if in_process else Mounted
    with asker(vault_path, work / level) as searcher:
        for sample in data:
            for question in sample["qa"]:
                category = question.get("category")
                query = query_for(question["question"], sample["sample_id"])
                started = time.perf_counter()
                ranked = searcher.ask(query)
                latencies.append(time.perf_counter() - started)
                if category == 5:
                    adversarial += 1
                    adversarial_empty += not ranked
                    continue
                wanted = relevant(sample, question, level)
                if category in CATEGORIES and wanted:
                    got = scores(ranked, wanted)
                    per_cat[CATEGORIES[category]].append(got)
                    per_cat["all"].append(got)
    print(f"\n## {level} level ({'in process' if in_process else 'through the mount'})\n")
    print("| category | questions | R@5 | R@10 | nDCG@10 |")
    print("|---|---|---|---|---|")
    for name in [*CATEGORIES.values(), "all"]:
        rows = per_cat[name]
        means = {m: statistics.mean(r[m] for r in rows) for m in ("R@5", "R@10", "nDCG@10")}
        print(
            f"| {name} | {len(rows)} | {means['R@5']:.3f} | {means['R@10']:.3f} "
            f"| {means['nDCG@10']:.3f} |"
        )
    if adversarial:
        print(
            f"\nadversarial (category 5): {adversarial_empty}/{adversarial} answered "
            f"'nothing relevant' ({adversarial_empty / adversarial:.0%})"
        )
    latencies.sort()
    print(
        f"query latency: median {statistics.median(latencies) * 1e3:.1f} ms, "
        f"p95 {latencies[int(0.95 * len(latencies))] * 1e3:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--level", choices=["turn", "session", "both"], default="both")
    parser.add_argument("--vault", type=Path, help="keep the vaults here between runs")
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"bench retrieval: no development set at {args.data}")
    data = json.loads(args.data.read_text())
    levels = ["turn", "session"] if args.level == "both" else [args.level]
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        work = args.vault or Path(tmp)
        print(f"# memvault retrieval benchmark ({time.strftime('%Y-%m-%d')}, {args.data.name})")
        for level in levels:
            measure(data, level, work, args.in_process)


if __name__ == "__main__":
    main()
