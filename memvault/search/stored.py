"""A record's chunk vectors as stored in the vault (sealed there by Vault.put_derived).

The blob names the model that made the vectors (the first 8 bytes of its
SHA-256), the chunking that cut the text and how many chunks it has: vectors
of another model or another chunking are ignored on load and re-embedded,
never mixed with this one's.

Vectors are kept as float16: 768 bytes for 384 dimensions instead of 1,536,
and the index searches with them as stored, so it answers the same before
and after a lock. (int8 with a scale per vector would halve that again for
0.001 of the development set's R@10; see BENCHMARKS.md.) The header is 12
bytes, so a one-chunk memory's sealed vectors fit four to an LMDB page (the
JSON header before took them to three).
Blobs of earlier formats (a JSON header) are embedded again.
"""

from __future__ import annotations

import struct

import numpy as np

from ..index.chunking import CHUNKING_VERSION

FORMAT = 0xF3
"""The first byte of this format (an earlier blob starts with 0: its header's length)."""
_HEADER = struct.Struct(">B8sBH")  # format, model digest prefix, chunking, chunks
_VECTOR = np.dtype("<f2")


def encode_vectors(model_sha256: str, chunks, matrix: np.ndarray) -> bytes:
    """A record's float16 vectors, one per chunk."""
    header = _HEADER.pack(FORMAT, _model_id(model_sha256), CHUNKING_VERSION, len(chunks))
    return header + np.asarray(matrix, _VECTOR).tobytes()


def as_stored(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as it will read back from the vault."""
    return np.asarray(matrix, np.float16).astype(np.float32)


def decode_vectors(blob: bytes, pinned_model: str | None) -> np.ndarray | None:
    """The stored vectors (as float32) if they were made with the pinned model, else None."""
    try:
        form, model, chunking, chunks = _HEADER.unpack_from(blob)
        if form != FORMAT or chunking != CHUNKING_VERSION or not chunks or pinned_model is None:
            return None
        if model != _model_id(pinned_model):
            return None
        vectors = np.frombuffer(blob, _VECTOR, offset=_HEADER.size)
        return vectors.reshape(chunks, -1).astype(np.float32)
    except (ValueError, struct.error):
        return None


def _model_id(model_sha256: str) -> bytes:
    return bytes.fromhex(model_sha256)[:8]
