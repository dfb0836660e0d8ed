"""A record's chunk vectors as stored in the vault (sealed there by Vault.put_derived).

The blob names the model that made the vectors, and the chunking that cut the
text: vectors of another model or another chunking are ignored on load and
re-embedded, never mixed with this one's.
"""

from __future__ import annotations

import json
import struct

import numpy as np

from ..index.chunking import CHUNKING_VERSION

_HEADER = struct.Struct(">I")


def encode_vectors(model_sha256: str, chunks, matrix: np.ndarray) -> bytes:
    """A record's chunk spans and float32 vectors."""
    spans = [[c.start_line, c.end_line] for c in chunks]
    header = json.dumps(
        {"model": model_sha256, "chunking": CHUNKING_VERSION, "chunks": spans}
    ).encode()
    return _HEADER.pack(len(header)) + header + np.ascontiguousarray(matrix, np.float32).tobytes()


def decode_vectors(blob: bytes, pinned_model: str | None) -> np.ndarray | None:
    """The stored vectors if they were made with the pinned model, else None."""
    try:
        (length,) = _HEADER.unpack_from(blob)
        header = json.loads(blob[_HEADER.size : _HEADER.size + length])
        if header["model"] != pinned_model or header.get("chunking", 1) != CHUNKING_VERSION:
            return None
        matrix = np.frombuffer(blob[_HEADER.size + length :], dtype=np.float32)
        return matrix.reshape(len(header["chunks"]), -1) if header["chunks"] else None
    except (ValueError, KeyError, struct.error):
        return None
