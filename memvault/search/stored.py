"""A record's chunk vectors as stored in the vault (sealed there by Vault.put_derived).

The blob names the model that made the vectors, and the chunking that cut the
text: vectors of another model or another chunking are ignored on load and
re-embedded, never mixed with this one's.
"""

from __future__ import annotations

import functools
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
        header = blob[_HEADER.size : _HEADER.size + length]
        if header.startswith(_expected_start(pinned_model)):
            # What encode_vectors writes for this model and chunking: only
            # numbers follow, so each span is one "[" (an unlock decodes
            # 20,000 of these: no JSON parse).
            chunks = header.count(b"[") - 1
        else:
            parsed = json.loads(header)
            if parsed["model"] != pinned_model or parsed.get("chunking", 1) != CHUNKING_VERSION:
                return None
            chunks = len(parsed["chunks"])
        matrix = np.frombuffer(blob[_HEADER.size + length :], dtype=np.float32)
        return matrix.reshape(chunks, -1) if chunks else None
    except (ValueError, KeyError, struct.error):
        return None


@functools.lru_cache(maxsize=4)
def _expected_start(model_sha256: str | None) -> bytes:
    header = json.dumps({"model": model_sha256, "chunking": CHUNKING_VERSION, "chunks": []})
    return header[: -len("]}")].encode()
