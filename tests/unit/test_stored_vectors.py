"""Stored chunk vectors are used only with the model and the chunking that made them."""

from __future__ import annotations

import json
import struct

import numpy as np

from memvault.index.chunking import CHUNKING_VERSION, chunk_markdown
from memvault.search.stored import decode_vectors, encode_vectors


def test_vectors_of_another_model_or_chunking_are_not_used():
    chunks = chunk_markdown("# A\none\n# B\ntwo\n")
    matrix = np.arange(2 * 4, dtype=np.float32).reshape(2, 4)
    blob = encode_vectors("sha-a", chunks, matrix)
    assert np.array_equal(decode_vectors(blob, "sha-a"), matrix)
    assert decode_vectors(blob, "sha-b") is None
    (length,) = struct.unpack_from(">I", blob)
    header = json.loads(blob[4 : 4 + length])

    def with_header(changed: dict) -> bytes:
        raw = json.dumps(changed).encode()
        return struct.pack(">I", len(raw)) + raw + blob[4 + length :]

    other = with_header({**header, "chunking": CHUNKING_VERSION + 1})
    assert decode_vectors(other, "sha-a") is None, "cut by another chunking"
    del header["chunking"]  # stored before chunkings had versions: version 1
    expected = matrix if CHUNKING_VERSION == 1 else None
    assert np.array_equal(decode_vectors(with_header(header), "sha-a"), expected)
