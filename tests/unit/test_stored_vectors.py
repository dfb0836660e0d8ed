"""Stored chunk vectors: compact, and used only with the model and the chunking
that made them."""

from __future__ import annotations

import json
import struct

import numpy as np

from memvault.index.chunking import CHUNKING_VERSION, chunk_markdown
from memvault.search.stored import as_stored, decode_vectors, encode_vectors

MODEL_A, MODEL_B = "aa" * 32, "ab" * 32


def unit_rows(count: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def stored() -> tuple[bytes, np.ndarray]:
    chunks = chunk_markdown("# A\none\n" + "x" * 2000 + "\n# B\ntwo\n")
    matrix = unit_rows(len(chunks))
    return encode_vectors(MODEL_A, chunks, matrix), matrix


def test_vectors_are_stored_as_int8_and_read_back_as_the_index_holds_them():
    blob, matrix = stored()
    assert len(blob) == 12 + len(matrix) * 384, "a 12-byte header, one byte a dimension"
    decoded = decode_vectors(blob, MODEL_A)
    assert decoded.dtype == np.float32 and np.array_equal(decoded, as_stored(matrix))
    assert np.allclose(np.linalg.norm(decoded, axis=1), 1, atol=1e-6), "unit vectors"
    assert (decoded * matrix).sum(1).min() > 0.9999
    again = encode_vectors(
        MODEL_A, chunk_markdown("# A\none\n" + "x" * 2000 + "\n# B\ntwo\n"), decoded
    )
    assert again == blob, "what the index holds stores as the same bytes"


def test_float16_vectors_of_the_format_before_are_still_read():
    chunks = chunk_markdown("# A\none\n")
    matrix = unit_rows(len(chunks))
    header = struct.pack(">B8sBH", 0xF3, bytes.fromhex(MODEL_A)[:8], CHUNKING_VERSION, len(chunks))
    decoded = decode_vectors(header + matrix.astype("<f2").tobytes(), MODEL_A)
    assert np.array_equal(decoded, matrix.astype(np.float16).astype(np.float32))


def test_vectors_of_another_model_chunking_or_format_are_not_used():
    blob, _ = stored()
    assert decode_vectors(blob, MODEL_B) is None, "another model"
    assert decode_vectors(blob, None) is None, "no model pinned"
    other = bytearray(blob)
    other[9] = (CHUNKING_VERSION + 1) % 256
    assert decode_vectors(bytes(other), MODEL_A) is None, "cut by another chunking"
    header = json.dumps({"model": MODEL_A, "chunking": CHUNKING_VERSION, "chunks": [[1, 2]]})
    earlier = struct.pack(">I", len(header)) + header.encode() + bytes(1536)
    assert decode_vectors(earlier, MODEL_A) is None, "an earlier format: embedded again"
    assert decode_vectors(blob[:-1], MODEL_A) is None, "not one vector per chunk"
    assert decode_vectors(blob[:5], MODEL_A) is None
