"""A record's chunk vectors as stored in the vault (sealed there by Vault.put_derived).

The blob names the model that made the vectors, and the chunking that cut the
text: vectors of another model or another chunking are ignored on load and
re-embedded, never mixed with this one's.

Each vector is kept as int8 with one float32 scale (its largest component
over 127): 388 bytes for 384 dimensions instead of 1,536, and a cosine
within 1e-4 of the float vector's (retrieval on the development set is
unchanged; BENCHMARKS.md). Blobs written before (float32, chunking 1) are
of an older chunking, so they are re-embedded.
"""

from __future__ import annotations

import functools
import json
import struct

import numpy as np

from ..index.chunking import CHUNKING_VERSION

_HEADER = struct.Struct(">I")


def encode_vectors(model_sha256: str, chunks, matrix: np.ndarray) -> bytes:
    """A record's chunk spans and int8 vectors, each with its scale."""
    spans = [[c.start_line, c.end_line] for c in chunks]
    header = json.dumps(_header(model_sha256) | {"chunks": spans}).encode()
    scales, codes = _quantize(matrix)
    return _HEADER.pack(len(header)) + header + scales.astype(">f4").tobytes() + codes.tobytes()


def as_stored(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as it will read back from the vault: the index searches with these
    from the start, so its answers are the same before and after a lock."""
    scales, codes = _quantize(matrix)
    return codes.astype(np.float32) * scales[:, None]


def _quantize(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    matrix = np.asarray(matrix, np.float32).reshape(len(matrix), -1)
    scales = np.abs(matrix).max(axis=1, initial=0) / np.float32(127)
    scales = np.maximum(scales, np.finfo(np.float32).tiny)
    return scales, np.rint(matrix / scales[:, None]).astype(np.int8)


def decode_vectors(blob: bytes, pinned_model: str | None) -> np.ndarray | None:
    """The stored vectors (float32) if they were made with the pinned model, else None."""
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
        body = memoryview(blob)[_HEADER.size + length :]
        scales = np.frombuffer(body[: 4 * chunks], ">f4").astype(np.float32)
        codes = np.frombuffer(body[4 * chunks :], np.int8).reshape(chunks, -1)
        return codes.astype(np.float32) * scales[:, None]
    except (ValueError, KeyError, struct.error):
        return None


def _header(model_sha256: str | None) -> dict:
    return {"model": model_sha256, "chunking": CHUNKING_VERSION, "vectors": "int8"}


@functools.lru_cache(maxsize=4)
def _expected_start(model_sha256: str | None) -> bytes:
    header = json.dumps(_header(model_sha256) | {"chunks": []})
    return header[: -len("]}")].encode()
