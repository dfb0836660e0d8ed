"""The sentence-embedding network written as an ONNX graph, from its safetensors weights.

BERT embeddings and LayerNorm, 6 encoder layers with the attention mask, GELU
feed-forward, mean pooling over the mask, L2 normalisation, with the ``onnx``
helper API. Deterministic: the same weights give a byte-identical file. Only
needed the first time a machine builds the model (model.py caches the file),
so the mount never pays for importing ``onnx``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .model import HEADS, HIDDEN, LAYERS, LN_EPS, OPSET


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file (8-byte header length, JSON header, data)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).astype(np.float32)
    return tensors


class _Graph:
    """A small builder that names nodes and initializers deterministically."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        w = self.const(f"{name}.weight_t", weight.T.astype(np.float32))
        b = self.const(f"{name}.bias", bias.astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        w = self.const(f"{name}.weight", weight)
        b = self.const(f"{name}.bias", bias)
        return self.op("LayerNormalization", [x, w, b], axis=-1, epsilon=LN_EPS)


def _find_prefix(weights: dict[str, np.ndarray]) -> str:
    return "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""


def build(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    p = _find_prefix(weights)
    g = _Graph()
    head_dim = HIDDEN // HEADS

    # Embeddings: words + positions (a slice of the table, not a Gather over
    # a computed range, which onnxruntime's optimiser mishandles) + type 0.
    words = g.op(
        "Gather",
        [g.const("word_embeddings", weights[f"{p}embeddings.word_embeddings.weight"]), "input_ids"],
    )
    seq_len = g.op(
        "Slice",
        [
            g.op("Shape", ["input_ids"]),
            g.const("one_i64", np.array([1], np.int64)),
            g.const("two_i64", np.array([2], np.int64)),
        ],
    )
    positions = g.op(
        "Slice",
        [
            g.const("position_embeddings", weights[f"{p}embeddings.position_embeddings.weight"]),
            g.const("zero_i64", np.array([0], np.int64)),
            seq_len,
            g.const("axis0", np.array([0], np.int64)),
        ],
    )
    token_type = g.const("token_type_0", weights[f"{p}embeddings.token_type_embeddings.weight"][0])
    x = g.op("Add", [g.op("Add", [words, positions]), token_type])
    x = g.layer_norm(
        x,
        weights[f"{p}embeddings.LayerNorm.weight"],
        weights[f"{p}embeddings.LayerNorm.bias"],
        "embeddings.LayerNorm",
    )

    # Additive attention mask: 0 where attended, -10000 where padded; [B, 1, 1, S].
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    additive = g.op(
        "Mul",
        [
            g.op("Sub", [g.const("one_f", np.array(1.0, np.float32)), mask_f]),
            g.const("neg_big", np.array(-10000.0, np.float32)),
        ],
    )
    additive = g.op("Unsqueeze", [additive, g.const("axes_1_2", np.array([1, 2], np.int64))])
    split_heads = g.const("split_heads", np.array([0, 0, HEADS, head_dim], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, HIDDEN], np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    sqrt2 = g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    half = g.const("half", np.array(0.5, np.float32))
    one = g.const("one", np.array(1.0, np.float32))

    for i in range(LAYERS):
        n = f"{p}encoder.layer.{i}."

        def w(name: str, n=n) -> np.ndarray:
            return weights[n + name]

        def heads(t: str, perm: list[int]) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, split_heads])], perm=perm)

        q = heads(
            g.linear(
                x, w("attention.self.query.weight"), w("attention.self.query.bias"), f"l{i}.q"
            ),
            [0, 2, 1, 3],
        )
        k = heads(
            g.linear(x, w("attention.self.key.weight"), w("attention.self.key.bias"), f"l{i}.k"),
            [0, 2, 3, 1],
        )
        v = heads(
            g.linear(
                x, w("attention.self.value.weight"), w("attention.self.value.bias"), f"l{i}.v"
            ),
            [0, 2, 1, 3],
        )
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), additive])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attn = g.linear(
            context,
            w("attention.output.dense.weight"),
            w("attention.output.dense.bias"),
            f"l{i}.attn_out",
        )
        x = g.layer_norm(
            g.op("Add", [attn, x]),
            w("attention.output.LayerNorm.weight"),
            w("attention.output.LayerNorm.bias"),
            f"l{i}.ln1",
        )
        h = g.linear(x, w("intermediate.dense.weight"), w("intermediate.dense.bias"), f"l{i}.ff1")
        h = g.op(
            "Mul",
            [g.op("Mul", [h, half]), g.op("Add", [one, g.op("Erf", [g.op("Div", [h, sqrt2])])])],
        )  # exact GELU
        h = g.linear(h, w("output.dense.weight"), w("output.dense.bias"), f"l{i}.ff2")
        x = g.layer_norm(
            g.op("Add", [h, x]),
            w("output.LayerNorm.weight"),
            w("output.LayerNorm.bias"),
            f"l{i}.ln2",
        )

    # Mean pooling over the attended tokens, then L2 normalisation.
    mask3 = g.op("Unsqueeze", [mask_f, g.const("axis_2", np.array([2], np.int64))])
    summed = g.op(
        "ReduceSum",
        [g.op("Mul", [x, mask3]), g.const("axis_1", np.array([1], np.int64))],
        keepdims=0,
    )
    counts = g.op(
        "Clip",
        [
            g.op("ReduceSum", [mask3, g.const("axis_1b", np.array([1], np.int64))], keepdims=0),
            g.const("tiny", np.array(1e-9, np.float32)),
        ],
    )
    pooled = g.op("Div", [summed, counts])
    norm = g.op(
        "Clip",
        [
            g.op("ReduceL2", [pooled], axes=[-1], keepdims=1),
            g.const("tiny_norm", np.array(1e-12, np.float32)),
        ],
    )
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embeddings"], name="normalize"))

    graph = helper.make_graph(
        g.nodes,
        "memvault-minilm",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", HIDDEN])],
        g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="memvault",
        producer_version="1",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
