"""Folding the local model: the int8 weights become float once, the embedding tables stay int8
and are looked up row by row, and the vectors are exactly those of the model as downloaded
(real model, real onnx and onnxruntime)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from tarsd.embed.folding import folded_model
from tarsd.embed.onnx_model import OnnxEncoder, truncation_of

TEXTS = [
    "Sourdough needs a starter fed the evening before.",
    "短い日本語の文。",
    "x",
    " ".join(["A long passage about bread, ovens and the temperature of the kitchen."] * 30),  # past 256 tokens
]


def vectors(model: Path, model_dir: Path) -> np.ndarray:
    return OnnxEncoder(model, model_dir / "tokenizer.json", truncation_of(model_dir), "mean", 1).encode(TEXTS, 1)


def test_the_folded_model_keeps_its_tables_int8_and_gives_the_same_vectors(model_dir: Path, tmp_path: Path):
    original = model_dir / "model.onnx"
    digest = hashlib.sha256(original.read_bytes()).hexdigest()[:16]
    (tmp_path / "folded").mkdir()
    older = tmp_path / "folded" / f"folded-{digest}.onnx"  # as the tars before this one named it
    older.write_bytes(b"an older fold")
    folded = folded_model(original, tmp_path / "folded")
    assert not older.exists(), "the older fold of the same model was left in the cache"
    assert folded != original and folded.parent == tmp_path / "folded", "folding failed: the model would run unfolded"
    assert folded_model(original, tmp_path / "folded") == folded  # made once

    graph = onnx.load(str(folded)).graph
    initializers = {init.name: init for init in graph.initializer}

    def read_by(op: str) -> list[onnx.TensorProto]:
        return [initializers[name] for node in graph.node if node.op_type == op for name in node.input if name in initializers]

    looked_up = {tuple(init.dims): init.data_type for init in read_by("Gather") if len(init.dims) == 2 and init.dims[1] == 384}
    assert looked_up.get((30522, 384)) == TensorProto.INT8, f"the word-embedding table was folded to float: {looked_up}"
    assert looked_up.get((512, 384)) == TensorProto.INT8, looked_up
    weights = read_by("MatMul")
    assert len(weights) >= 36, "fewer weight matrices than the model's 6 layers have"
    assert all(init.data_type == TensorProto.FLOAT for init in weights), "a weight stayed int8: it would be converted at every run"
    assert folded.stat().st_size < 0.7 * (90 * 1024 * 1024)  # all float was 90 MB

    np.testing.assert_array_equal(vectors(folded, model_dir), vectors(original, model_dir))
