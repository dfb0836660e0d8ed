"""The local embedding model: parity with sentence-transformers, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memvault.index.embedder import DIMENSIONS, Embedder
from memvault.index.graph import build, read_safetensors
from memvault.index.model import package_dir, quantize

pytestmark = pytest.mark.model  # the real embedding model

REFERENCE = Path(__file__).parent.parent / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def unquantized() -> Embedder:
    return Embedder(quantized=False)


def _cosines(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return np.sum(got * expected, axis=1) / (
        np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1)
    )


def test_the_int8_model_stays_close_to_sentence_transformers(embedder, unquantized):
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    cosine = _cosines(embedder.embed(reference["texts"]), expected)
    assert cosine.min() >= 0.96 and cosine.mean() >= 0.985, (cosine.min(), cosine.mean())
    assert embedder.model_sha256 != unquantized.model_sha256
    assert embedder.model_path.stat().st_size < unquantized.model_path.stat().st_size / 3


def test_quantizing_is_byte_identical(tmp_path, unquantized):
    quantize(unquantized.model_path, tmp_path / "a.onnx")
    quantize(unquantized.model_path, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_parity_with_sentence_transformers(unquantized):
    embedder = unquantized
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    got = embedder.embed(reference["texts"])
    assert got.shape == expected.shape == (len(reference["texts"]), DIMENSIONS)
    cosine = _cosines(got, expected)
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.9999, (reference["texts"][worst][:60], float(cosine[worst]))
    # Batching (padding to the longest text) does not change a text's vector.
    alone = embedder.embed([reference["texts"][1]])[0]
    assert float(alone @ got[1]) > 0.99999


def test_vectors_are_normalised_and_meaningful(embedder):
    v = embedder.embed(
        ["how do we deploy the service", "deploys go through make release", "I like cats"]
    )
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_build_is_byte_identical():
    weights = read_safetensors(package_dir() / "model.safetensors")
    assert build(weights).SerializeToString() == build(weights).SerializeToString()


def test_a_batch_of_long_texts_leaves_no_memory_held():
    """onnxruntime's arena would keep the largest batch's activations (400 MB
    for 16 chunks of 256 tokens) for the daemon's life."""

    def anonymous_mib() -> int:
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(x.split()[1]) for x in status if x.startswith("RssAnon")) // 1024

    model = Embedder()
    model.embed(["warm up"])
    before = anonymous_mib()
    for _ in range(2):
        model.embed([f"word{i} " * 300 for i in range(16)])
    assert anonymous_mib() - before < 150


def test_a_text_tokenized_then_run_is_embedded_as_in_a_batch(embedder):
    texts = ["fish tank", "The zebrafish tank was cleaned on Tuesday. " * 20]
    alone = np.stack([embedder.run(embedder.tokenize(t)) for t in texts])
    assert np.array_equal(alone, embedder.embed(texts))
