"""Search over an unlocked vault: keeps the hybrid index in step with the vault.

The file system's CPU comes first. A change only marks its record as
changed (a dict update on the writer's thread); the words of changed
records are indexed by the next query before it runs (read-your-writes) or,
once they have been quiet for ``quiet`` seconds, by the background workers,
which then embed them in batches at the lowest CPU priority (SCHED_IDLE). A
burst of writes never waits for the model, and a file rewritten fifty times
is chunked and embedded once. The workers also wait for a lull in the
mount's requests before each batch (see activity.py): a worker at idle
priority still holds the GIL the file system's thread needs. Results name
records, not paths: a renamed memory is found under its new path, a
shredded one never again.

Each record's chunk vectors are stored in the vault, sealed under that
record's own key and bound to its body generation (Vault.put_derived), so
an unlock embeds only what changed. At lock, the rest of the index (words,
chunk places, the vector graph without its vectors) is stored in the vault
too, sealed (Vault.put_search_index); the vault deletes it with the first
change of the next session, so it never outlives a shredded memory. An
unlock takes it with each record's vectors and indexes only the records it
does not cover, instead of reading, chunking and tokenizing every memory
and building the graph again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import heap
from ..errors import MemoryCorrupted, MemoryNotFound, ModelMismatch
from ..index.chunking import CHUNKING_VERSION, chunk_text
from ..index.hybrid import Hit, HybridIndex
from ..index.packing import pack, unpack
from ..index.vectors import HNSW_THRESHOLD, GraphBuild
from ..vault import Vault
from ..vault.records import FILE
from .query import Query
from .result import Result, describe
from .stored import as_stored, decode_vectors, encode_vectors

log = logging.getLogger("memvault.search")

EMBED_BATCH = 16
QUIET_S = 2.0
"""Seconds a memory is left alone before it is embedded (and indexed, if no query came)."""
POLL_S = 0.25
BATCH_PATIENCE = 5.0
"""Seconds a worker waits at most for a lull in the mount's requests before a batch."""
INDEXED_SUFFIXES = (".md", ".markdown", ".txt")
MAX_INDEXED_BYTES = 4 << 20
QUERY_VECTORS = 64
GIVE_BACK_AFTER_S = 2.0
"""Seconds without a search or an embedding after which freed memory goes back
to the system (about 50 ms of work at 20,000 memories, in that pause)."""
STORED_INDEX_FORMAT = 3


def indexable(path: str, size: int) -> bool:
    return path.lower().endswith(INDEXED_SUFFIXES) and size <= MAX_INDEXED_BYTES


class SearchService:
    """The search index of one unlocked vault.

    ``make_embedder`` is called once, lazily, by the background thread (or
    the first query): loading the model costs a second of CPU that a vault
    nobody searches should not pay at unlock. ``make_unquantized`` gives the
    float model that vaults embedded before the int8 one are pinned to: they
    keep it until `memvault reindex`.
    """

    def __init__(
        self,
        vault: Vault,
        make_embedder: Callable,
        dim: int,
        *,
        hnsw_threshold: int | None = None,
        workers: int = 1,
        quiet: float = QUIET_S,
        make_unquantized: Callable | None = None,
    ) -> None:
        self.vault = vault
        self._make_embedder = make_embedder
        self._make_unquantized = make_unquantized
        self._model = None  # the installed model, once loaded
        self._embedder = None  # the same, once accepted for this vault
        self._embedder_lock = threading.Lock()
        self._dim = dim
        self._hnsw_threshold = hnsw_threshold or HNSW_THRESHOLD
        self.index = HybridIndex(dim, hnsw_threshold=self._hnsw_threshold)
        self._body_gen: dict[bytes, int] = {}  # the body each record was indexed from
        # Records changed since their words were indexed, and records changed
        # in the last ``quiet`` seconds, each in order of its last change.
        self._changed: dict[bytes, float] = {}
        self._touched: dict[bytes, float] = {}
        self._claimed: set[int] = set()  # chunks a worker is embedding
        self._in_flight = 0  # batches being embedded or stored
        self._loading = False  # index_all is running: build no HNSW graph yet
        self._building_graph = False
        self._replace_stored = False  # the stored index was not usable: store anew at lock
        self._lock = threading.Lock()  # the index, claims, batches
        # Only these two guard the change marks: a writer never waits for a
        # worker (at idle priority) that holds the index lock.
        self._marks = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._workers = workers
        self._quiet = quiet
        self._threads: list[threading.Thread] = []
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._query_lock = threading.Lock()
        self._query_threads = ThreadPoolExecutor(2, thread_name_prefix="query-embedder")
        self._give_back = heap.Debounced(GIVE_BACK_AFTER_S, self._release_memory)
        vault.add_listener(self._on_change)

    def _loaded(self):
        """The model, loaded once (caller holds the embedder lock)."""
        if self._model is None:
            self._model = self._make_embedder()
        return self._model

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.ensure_model().embed(texts)

    def _query_embedding(self, text: str) -> Callable[[], np.ndarray]:
        """The query's embedding, to be had by calling what this returns: the text
        is tokenized now, the model runs then (without the GIL, while the
        query's words are scored on another thread).

        Reused by the variants an agent reads in a row (`q`, `q.json`,
        `q?k=20`): embedding is most of a query's time. Kept per model, in
        memory only, and only the last QUERY_VECTORS queries."""
        model = self.ensure_model()
        key = (model.model_sha256, text)
        with self._query_lock:
            vector = self._query_vectors.get(key)
            if vector is not None:
                self._query_vectors.move_to_end(key)
                return lambda: vector
        feed = model.tokenize(text)

        def run() -> np.ndarray:
            vector = model.run(feed)
            with self._query_lock:
                self._query_vectors[key] = vector
                while len(self._query_vectors) > QUERY_VECTORS:
                    self._query_vectors.popitem(last=False)
            return vector

        return run

    def ensure_model(self):
        """The accepted embedder; raises ModelMismatch if the vault is pinned to another."""
        with self._embedder_lock:
            if self._embedder is None:
                model = self._loaded()
                pinned = self.vault.pinned_model()
                if pinned is None and not self.vault.readonly:
                    self.vault.pin_model(model.model_sha256)  # first use pins the model
                elif pinned is not None and pinned != model.model_sha256:
                    model = self._pinned_earlier(pinned, model)
                self._embedder = model
            return self._embedder

    def _pinned_earlier(self, pinned: str, installed):
        """The float model if the vault is pinned to it, else ModelMismatch."""
        if self._make_unquantized is not None:
            earlier = self._make_unquantized()
            if earlier.model_sha256 == pinned:
                return earlier
        raise ModelMismatch(pinned[:12], installed.model_sha256[:12])

    # -- keeping up with the vault ----------------------------------------------

    def index_all(self) -> None:
        """Index every memory: words now, vectors from the vault or in the background."""
        pinned = self.vault.pinned_model()
        self._loading = True
        try:
            self._restore(pinned)
            self._load_all(pinned)
        finally:
            with self._lock:
                self._loading = False
                self._maybe_build_graph()
            self._wake.set()
            self._release_memory()

    def _restore(self, pinned: str | None) -> None:
        """Take the index stored at the last lock, with each record's vectors."""
        data = self.vault.search_index() if pinned is not None else None
        if data is None:
            return
        self._replace_stored = True  # until it proves usable

        def vectors_of(wanted: list[tuple[bytes, int]]) -> list[np.ndarray | None]:
            """Each record's stored vectors, if made from the body the index knew."""
            current = [self.vault.by_record_id(record_id) for record_id, _ in wanted]
            fresh = [
                meta is not None and not meta.orphan and meta.body_gen == version
                for meta, (_, version) in zip(current, wanted, strict=True)
            ]
            stored = self.vault.get_derived_many(
                [record_id for (record_id, _), ok in zip(wanted, fresh, strict=True) if ok]
            )
            found = iter(decode_vectors(blob, pinned) if blob else None for blob in stored)
            return [next(found) if ok else None for ok in fresh]

        try:
            header, body = unpack(data, 2)
            made = json.loads(bytes(header))
            if made != self._stored_header(pinned):
                return  # another model, chunking or format: indexed anew, stored at lock
            index, versions = HybridIndex.restore(
                zlib.decompress(body), self._dim, vectors_of, hnsw_threshold=self._hnsw_threshold
            )
        except Exception as exc:  # a cache: the memories themselves rebuild it
            log.warning(
                "the stored search index is unusable (%s); rebuilding it", type(exc).__name__
            )
            return
        with self._lock:
            indexed_meanwhile = list(self._body_gen)  # by queries, while this loaded
            self.index = index
            self._body_gen = dict(versions)
            self._replace_stored = False
        now = time.monotonic()
        with self._marks:
            for record_id in indexed_meanwhile:
                self._changed.setdefault(record_id, now)

    @staticmethod
    def _stored_header(pinned: str) -> dict:
        return {"format": STORED_INDEX_FORMAT, "model": pinned, "chunking": CHUNKING_VERSION}

    def _store_index(self) -> None:
        """Leave the index in the vault for the next unlock, unless a usable one is there."""
        pinned = self.vault.pinned_model()
        stored = self.vault.search_index_stored and not self._replace_stored
        if self.vault.readonly or stored or pinned is None:
            return
        with self._lock:
            if self._loading:
                return
            exported = self.index.export(self._body_gen)
        # Compressed (the word index's postings shrink 5x, the graph 2x: 980 ->
        # 290 bytes a memory at 20,000), then sealed padded like every value.
        data = pack(json.dumps(self._stored_header(pinned)).encode(), zlib.compress(exported, 3))
        try:
            self.vault.put_search_index(data)
        except Exception as exc:  # only an unlock speed-up: the disk may be full
            log.warning("search index not stored: %s", type(exc).__name__)

    def _load_all(self, pinned: str | None) -> None:
        """Index every memory the restored index does not hold as it is now."""
        covered = set(self._body_gen)
        for meta in self.vault.walk():
            if meta.type == FILE and indexable(meta.path, meta.size):
                try:
                    record_id = self.vault.record_id(meta.path)
                    covered.discard(record_id)
                    if self._body_gen.get(record_id) == meta.body_gen:
                        continue  # restored
                    text = self.vault.get(meta.path).decode("utf-8", errors="replace")
                    stored = self.vault.get_derived(record_id)
                except Exception as exc:  # a damaged memory is reported when read
                    log.warning("not indexed: %s", type(exc).__name__)
                    continue
                vectors = decode_vectors(stored, pinned) if stored else None
                with self._lock:
                    # A write may have landed since the body was read: keep the newer.
                    current = self.vault.by_record_id(record_id)
                    if current is None or current.body_gen != meta.body_gen:
                        continue
                    if self._body_gen.get(record_id) == meta.body_gen:
                        continue  # already indexed from this very body
                    self.index.put(record_id, text, vectors)
                    self._body_gen[record_id] = meta.body_gen
        now = time.monotonic()
        with self._marks:  # restored, and gone or moved out of the index since
            for record_id in covered:
                self._changed.setdefault(record_id, now)

    def _maybe_build_graph(self) -> None:
        """Start building the HNSW graph in its own thread once it is due (lock held).

        Building takes tens of seconds at 50,000 chunks; exact search answers
        meanwhile, and the changes made during the build are replayed. Only a
        started service (the daemon's) builds one: a one-shot search would
        exit before it is done.
        """
        if self._loading or self._stopping or not self._threads:
            return
        job = self.index.plan_graph()
        if job is None:
            return
        self._building_graph = True
        threading.Thread(
            target=self._build_graph, args=(job,), name="vector-graph", daemon=True
        ).start()

    def _build_graph(self, job: GraphBuild) -> None:
        try:
            job.build()
        except Exception as exc:
            log.error("vector graph not built: %s", type(exc).__name__)
        finally:
            with self._lock:
                job.install()  # or gives the build up if it failed
                self._building_graph = False
            heap.trim()  # the build's copy of the vectors

    def _on_change(self, kind: str, record_id: bytes, path: str, data: bytes | None) -> None:
        """A record changed (put, move, delete): noted, nothing more on the writer's thread."""
        now = time.monotonic()
        with self._marks:
            for pending in (self._changed, self._touched):
                pending.pop(record_id, None)  # to the end: the order of last change
                pending[record_id] = now
        if not self._wake.is_set():  # set() takes a lock and notifies: not per write
            self._wake.set()

    def _index_changed(self, *, quiet_since: float | None = None, limit: int | None = None):
        """Index the words of changed records (lock held): all of them, or those
        unchanged since ``quiet_since``, at most ``limit``."""
        done = 0
        while limit is None or done < limit:
            with self._marks:
                if not self._changed:
                    return
                record_id, when = next(iter(self._changed.items()))
                if quiet_since is not None and when > quiet_since:
                    return
                del self._changed[record_id]
            self._index_record(record_id)
            done += 1

    def _index_record(self, record_id: bytes) -> None:
        """The record's words as they are now in the vault (lock held)."""
        meta = self.vault.by_record_id(record_id)
        if meta is None or meta.orphan or meta.type != FILE or not indexable(meta.path, meta.size):
            self.index.remove(record_id)  # shredded or unlinked, or renamed away from .md
            self._body_gen.pop(record_id, None)
            return
        if self._body_gen.get(record_id) == meta.body_gen:
            return  # renamed or re-stamped: the index follows record ids, not names
        try:
            text = self.vault.get_record(record_id).decode("utf-8", errors="replace")
        except MemoryNotFound:
            self.index.remove(record_id)
            self._body_gen.pop(record_id, None)
            return
        except Exception as exc:  # a damaged memory is reported when read
            log.warning("not indexed: %s", type(exc).__name__)
            return
        self.index.put(record_id, text)
        self._body_gen[record_id] = meta.body_gen

    def reindex(self) -> str:
        """Re-pin the vault to the installed model and rebuild the index; return its hash."""
        with self._embedder_lock:
            embedder = self._loaded()
            if not self.vault.readonly:
                self.vault.drop_derived()
                self.vault.pin_model(embedder.model_sha256)
            self._embedder = embedder
        with self._lock:
            self.index = HybridIndex(self._dim, hnsw_threshold=self._hnsw_threshold)
            self._body_gen.clear()
            self._claimed.clear()
        self.index_all()
        return embedder.model_sha256

    def start(self) -> None:
        for n in range(self._workers):
            thread = threading.Thread(target=self._embed_loop, name=f"embedder-{n}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._query_threads.shutdown(wait=False)
        self._give_back.stop()
        self._store_index()

    def _release_memory(self) -> None:
        """Freed heap pages, and the vault file's pages read through LMDB's map
        (page cache, read back when next touched), out of the resident set."""
        heap.trim()
        heap.drop_mapped(self.vault.path)

    def catch_up(self) -> None:
        """Index every memory and embed it in the caller's thread (a one-shot search)."""
        self.index_all()
        while True:
            with self._lock:
                self._index_changed()
                batch = self.index.pending_batch(4 * EMBED_BATCH)
            if not batch:
                return
            self._absorb(batch, self._embed(list(batch.values())))

    def _embed_loop(self) -> None:
        """A worker: index and embed what has been quiet, at the lowest CPU priority."""
        lower_priority()
        while True:
            self._wake.clear()  # a change from now on sets it again: no wake-up is lost
            self.vault.activity.wait_for_lull(BATCH_PATIENCE, stopping=lambda: self._stopping)
            with self._lock:
                if self._stopping:
                    return
                batch = self._next_batch()
                if batch is not None:
                    self._claimed.update(batch)
                    self._in_flight += 1
            if batch is None:
                self._wake.wait(POLL_S if self._touched or self._changed else None)
                continue
            try:
                vectors = self._embed(list(batch.values()))
            except ModelMismatch:
                with self._lock:  # wait for `memvault reindex` (or more work) and retry
                    self._release(batch)
                self._wake.wait()
                continue
            except Exception as exc:
                log.error("embedding failed: %s", type(exc).__name__)
                with self._lock:
                    self._release(batch)
                return
            try:
                self._absorb(batch, vectors)
            except Exception as exc:  # a bug: say so rather than die unseen
                log.error("embedded vectors not indexed: %s", type(exc).__name__)
                return
            finally:
                with self._lock:
                    self._release(batch)

    def _next_batch(self) -> dict[int, str] | None:
        """Up to EMBED_BATCH quiet chunks nobody embeds yet, shortest first (lock held)."""
        if self._stopping:
            return None
        quiet_since = time.monotonic() - self._quiet
        with self._marks:
            while self._touched:  # forget what has been quiet long enough
                record_id, when = next(iter(self._touched.items()))
                if when > quiet_since:
                    break
                del self._touched[record_id]
        self._index_changed(quiet_since=quiet_since, limit=EMBED_BATCH)
        batch = self.index.pending_batch(
            EMBED_BATCH,
            skip=lambda cid: cid in self._claimed or self.index.record_of(cid) in self._touched,
        )
        return batch or None

    def _release(self, batch: dict[int, str]) -> None:
        self._claimed.difference_update(batch)
        self._in_flight -= 1
        self._wake.set()  # what is left may be another worker's next batch

    def _absorb(self, batch: dict[int, str], vectors: np.ndarray) -> None:
        """Add a batch's vectors to the index and store them, sealed, in the vault."""
        with self._lock:
            self.index.add_vectors(batch, as_stored(vectors))
            self._maybe_build_graph()
            done = self._completed(batch)
        self._store_vectors(done)
        self._give_back.poke()

    def _completed(self, batch: dict[int, str]) -> list[tuple[bytes, int, bytes]]:
        """Records of ``batch`` now fully embedded, encoded for storage (lock held)."""
        out = []
        for record_id in {self.index.record_of(cid) for cid in batch} - {None}:
            found = self.index.record_vectors(record_id)
            gen = self._body_gen.get(record_id)
            if found is not None and gen is not None and self._embedder is not None:
                chunks, matrix = found
                blob = encode_vectors(self._embedder.model_sha256, chunks, matrix)
                out.append((record_id, gen, blob))
        return out

    def _store_vectors(self, done: list[tuple[bytes, int, bytes]]) -> None:
        if self.vault.readonly:
            return
        try:
            self.vault.put_derived_many(done)  # one write for the batch's records
        except Exception as exc:  # the vault may be closing, or the disk full
            log.warning("vectors not stored: %s", type(exc).__name__)

    def state(self) -> str:
        """What the index is doing, for `memvault status`."""
        with self._lock:
            if self._loading:
                return "loading memories"
            if self._changed:
                return f"indexing {len(self._changed):,} changed memory(ies)"
            if self.index.pending or self._in_flight:
                return f"embedding {len(self.index.pending):,} chunk(s)"
            if self._building_graph:
                return "building the vector graph"
            return "ready"

    def releasing_memory(self) -> bool:
        """A release of freed memory is due (GIVE_BACK_AFTER_S after the last
        embedding or query) or running: background work `memvault status` shows."""
        return self._give_back.pending

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until every chunk has its vector and the graph is built (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = not (self._changed or self.index.pending or self._in_flight)
                if idle and not self._building_graph:
                    return True
            time.sleep(0.01)
        return False

    # -- queries -------------------------------------------------------------------

    def search(self, query: Query) -> list[Result]:
        """The answer to a checked query, best first; raises ModelMismatch, ModelMissing."""
        allowed = self.vault.records_under(query.prefix) if query.prefix else None
        with self._lock:
            self._index_changed()  # read-your-writes: every closed memory by its words
            read = functools.partial(self.index.read_words, query.text, allowed=allowed)
            # Tokenized before the words start: once they hold the GIL, this
            # thread would wait for them before it could start the model.
            embedding = self._query_embedding(query.text)
            try:  # words scored on another thread (under this lock) while this one embeds
                words = self._query_threads.submit(read)
            except RuntimeError:  # shut down
                vector, evidence = embedding(), read()
            else:
                try:
                    vector = embedding()
                finally:
                    evidence = words.result()  # never left running past the lock
            hits: list[Hit] = self.index.rank(evidence, vector, query.k)
        results = []
        for hit in hits:
            meta = self.vault.by_record_id(hit.record_id)
            if meta is None or meta.orphan:
                continue
            try:  # the words as they are now: never a rewritten or shredded text
                text = self.vault.get_record(hit.record_id).decode("utf-8", errors="replace")
            except (MemoryNotFound, MemoryCorrupted):  # shredded since, or damaged
                continue
            chunk = hit.chunk
            shown, words = describe(chunk_text(text, chunk), query.text, chunk.heading)
            results.append(
                Result(
                    len(results) + 1,
                    round(hit.score, 4),
                    meta.path,
                    chunk.heading or chunk.title,
                    chunk.start_line,
                    chunk.end_line,
                    shown,
                    None if hit.cosine is None else round(hit.cosine, 4),
                    words,
                    [[c.start_line, c.end_line] for c in hit.others],
                )
            )
        self._give_back.poke()
        return results


def lower_priority() -> None:
    """This thread (not the process) at the lowest CPU priority: it runs on
    cores the file system leaves idle (Linux: SCHED_IDLE, else nice 19)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
