"""A record's chunk vectors as stored in the vault (sealed there by Vault.put_derived).

The blob names the model that made the vectors (the first 8 bytes of its
SHA-256), the chunking that cut the text and how many chunks it has: vectors
of another model or another chunking are ignored on load and re-embedded,
never mixed with this one's.

Vectors are kept as int8, 384 bytes for 384 dimensions (float32 took 1,536):
each scaled so its largest coordinate is ±127, read back as the unit vector
in that direction (a cosine of at least 0.99995 with the float vector on
300 notes; the development set's R@10 moved by at most 0.001, BENCHMARKS.md).
The index searches with the vectors as read back (``as_stored``), so it
answers the same before and after a lock. With the 12-byte header, sealed at
their exact size (sealing.py), a one-chunk memory's vectors fit eight to an
LMDB page. Blobs of the float16 format before are read as they are; blobs of
earlier formats (a JSON header) are embedded again.
"""

from __future__ import annotations

import struct

import numpy as np

from ..index.chunking import CHUNKING_VERSION

FORMAT = 0xF4
FLOAT16_FORMAT = 0xF3
"""The format before (still read). An earlier blob starts with 0: its JSON header's length."""
_HEADER = struct.Struct(">B8sBH")  # format, model digest prefix, chunking, chunks
_DTYPES = {FORMAT: np.dtype("i1"), FLOAT16_FORMAT: np.dtype("<f2")}


def encode_vectors(model_sha256: str, chunks, matrix: np.ndarray) -> bytes:
    """A record's int8 vectors, one per chunk."""
    header = _HEADER.pack(FORMAT, _model_id(model_sha256), CHUNKING_VERSION, len(chunks))
    return header + _quantize(matrix).tobytes()


def as_stored(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as it will read back from the vault."""
    return _unit(_quantize(matrix))


def decode_vectors(blob: bytes, pinned_model: str | None) -> np.ndarray | None:
    """The stored vectors (as float32) if they were made with the pinned model, else None."""
    try:
        form, model, chunking, chunks = _HEADER.unpack_from(blob)
        if form not in _DTYPES or chunking != CHUNKING_VERSION or not chunks:
            return None
        if pinned_model is None or model != _model_id(pinned_model):
            return None
        vectors = np.frombuffer(blob, _DTYPES[form], offset=_HEADER.size).reshape(chunks, -1)
        return _unit(vectors) if form == FORMAT else vectors.astype(np.float32)
    except (ValueError, struct.error):
        return None


def _quantize(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to a largest coordinate of ±127 and rounded (idempotent
    on rows read back by ``_unit``: the largest stays at 127)."""
    rows = np.asarray(matrix, np.float32)
    peak = np.abs(rows).max(axis=1, keepdims=True)
    return np.rint(rows * (127 / np.where(peak > 0, peak, 1))).astype(np.int8)


def _unit(rows: np.ndarray) -> np.ndarray:
    """int8 rows as float32 unit vectors (a zero row stays zero)."""
    out = rows.astype(np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1)


def _model_id(model_sha256: str) -> bytes:
    return bytes.fromhex(model_sha256)[:8]
