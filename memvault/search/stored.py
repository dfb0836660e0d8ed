"""A record's chunk vectors as stored in the vault (sealed there by Vault.put_derived).

The blob names the model that made the vectors, and the chunking that cut the
text: vectors of another model or another chunking are ignored on load and
re-embedded, never mixed with this one's.

Vectors are kept as float16: 768 bytes for 384 dimensions instead of 1,536,
and the index searches with them as stored, so it answers the same before
and after a lock. (int8 with a scale per vector, half that again, moved the
LoCoMo development set's turn-level R@10 from 0.727 to 0.717; float16 leaves
it at 0.727.) Blobs written before (float32, chunking 1) are of an older
chunking, so they are embedded again.
"""

from __future__ import annotations

import functools
import json
import struct

import numpy as np

from ..index.chunking import CHUNKING_VERSION

_HEADER = struct.Struct(">I")


def encode_vectors(model_sha256: str, chunks, matrix: np.ndarray) -> bytes:
    """A record's chunk spans and float16 vectors."""
    spans = [[c.start_line, c.end_line] for c in chunks]
    header = json.dumps(_header(model_sha256) | {"chunks": spans}).encode()
    return _HEADER.pack(len(header)) + header + np.asarray(matrix, "<f2").tobytes()


def as_stored(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as it will read back from the vault."""
    return np.asarray(matrix, np.float16).astype(np.float32)


def decode_vectors(blob: bytes, pinned_model: str | None) -> np.ndarray | None:
    """The stored vectors (as float32) if they were made with the pinned model, else None."""
    try:
        (length,) = _HEADER.unpack_from(blob)
        header = blob[_HEADER.size : _HEADER.size + length]
        if header.startswith(_expected_start(pinned_model)):
            # What encode_vectors writes for this model and chunking: only
            # numbers follow, so each span is one "[" (an unlock decodes
            # 20,000 of these: no JSON parse).
            chunks = header.count(b"[") - 1
        else:
            parsed = json.loads(header)
            if any(parsed.get(key) != value for key, value in _header(pinned_model).items()):
                return None
            chunks = len(parsed["chunks"])
        if not chunks:
            return None
        vectors = np.frombuffer(blob, "<f2", offset=_HEADER.size + length)
        return vectors.reshape(chunks, -1).astype(np.float32)
    except (ValueError, KeyError, struct.error):
        return None


def _header(model_sha256: str | None) -> dict:
    return {"model": model_sha256, "chunking": CHUNKING_VERSION, "vectors": "float16"}


@functools.lru_cache(maxsize=4)
def _expected_start(model_sha256: str | None) -> bytes:
    header = json.dumps(_header(model_sha256) | {"chunks": []})
    return header[: -len("]}")].encode()
