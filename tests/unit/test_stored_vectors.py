"""Stored chunk vectors: compact, and used only with the model and the chunking
that made them."""

from __future__ import annotations

import json
import struct

import numpy as np

from memvault.index.chunking import CHUNKING_VERSION, chunk_markdown
from memvault.search.stored import as_stored, decode_vectors, encode_vectors


def unit_rows(count: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_vectors_are_stored_as_float16_and_read_back_as_the_index_holds_them():
    chunks = chunk_markdown("# A\none\n" + "x" * 2000 + "\n# B\ntwo\n")
    matrix = unit_rows(len(chunks))
    blob = encode_vectors("sha-a", chunks, matrix)
    (length,) = struct.unpack_from(">I", blob)
    assert len(blob) - 4 - length == len(chunks) * 384 * 2, "two bytes a dimension"
    decoded = decode_vectors(blob, "sha-a")
    assert decoded.dtype == np.float32 and np.array_equal(decoded, as_stored(matrix))
    assert (decoded * matrix).sum(1).min() > 0.99999


def test_vectors_of_another_model_or_chunking_are_not_used():
    chunks = chunk_markdown("# A\none\n" + "x" * 2000 + "\n# B\ntwo\n")
    matrix = unit_rows(len(chunks))
    blob = encode_vectors("sha-a", chunks, matrix)
    assert decode_vectors(blob, "sha-a") is not None
    assert decode_vectors(blob, "sha-b") is None
    (length,) = struct.unpack_from(">I", blob)
    header = json.loads(blob[4 : 4 + length])

    def with_header(changed: dict) -> bytes:
        raw = json.dumps(changed).encode()
        return struct.pack(">I", len(raw)) + raw + blob[4 + length :]

    reordered = with_header(dict(reversed(header.items())))  # parsed, not matched by prefix
    assert np.array_equal(decode_vectors(reordered, "sha-a"), decode_vectors(blob, "sha-a"))
    other = with_header({**header, "chunking": CHUNKING_VERSION + 1})
    assert decode_vectors(other, "sha-a") is None, "cut by another chunking"
    older = {key: value for key, value in header.items() if key not in ("chunking", "vectors")}
    assert decode_vectors(with_header(older), "sha-a") is None, "float32, chunking 1: embed again"
