"""The one way to build the search service of a vault: the daemon and the CLI alike."""

from __future__ import annotations

from ..vault import Vault
from .service import SearchService


def open_search(
    vault: Vault, *, threads: int = 1, workers: int = 0, hnsw_threshold: int | None = None
) -> SearchService:
    """The search index of an unlocked ``vault``, with the installed embedding model.

    The model is loaded on first use, with ``threads`` onnxruntime threads
    per run. Nothing is indexed yet: the daemon starts the service, whose
    ``workers`` embed in the background (each run on one thread at idle
    priority, a query on its own thread); the CLI calls ``catch_up``.
    """
    from ..index.embedder import DIMENSIONS, Embedder  # onnxruntime: only when searching

    return SearchService(
        vault,
        lambda: Embedder(threads=threads),
        DIMENSIONS,
        hnsw_threshold=hnsw_threshold,
        workers=workers,
        make_unquantized=lambda: Embedder(threads=threads, quantized=False),
    )
