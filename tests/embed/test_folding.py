"""Folding the local model: the int8 weights become float once, the embedding tables stay int8
and are looked up row by row, and the vectors are exactly those of the model as downloaded
(real model, real onnx and onnxruntime)."""

from __future__ import annotations

import hashlib
import json
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


def test_the_fold_drops_the_softmax_nan_guards_and_batches_give_the_same_vectors(model_dir: Path, tmp_path: Path):
    original = model_dir / "model.onnx"
    folded = folded_model(original, tmp_path / "folded")
    ops = [node.op_type for node in onnx.load(str(folded)).graph.node]
    assert "IsNaN" not in ops and ops.count("Softmax") == 6, "the guard after each of the 6 layers' softmax is still there"
    assert [node.op_type for node in onnx.load(str(original)).graph.node].count("IsNaN") == 6  # it was there to drop

    def encoder(model: Path, tokenizer: Path) -> OnnxEncoder:
        return OnnxEncoder(model, tokenizer, truncation_of(model_dir), "mean", 1)

    # Batches pad the shorter texts: their padding is masked, never their own tokens.
    batched = encoder(folded, model_dir / "tokenizer.json").encode(TEXTS, 3)
    np.testing.assert_allclose(batched, encoder(original, model_dir / "tokenizer.json").encode(TEXTS, 3), atol=1e-6)
    np.testing.assert_allclose(batched, vectors(folded, model_dir), atol=1e-5)

    # A tokenizer that adds no [CLS]/[SEP] gives "" no tokens at all: every key masked. Its
    # vector is zero, whatever the pooling (the first token would be the padding's).
    config = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    config["post_processor"] = None
    bare = tmp_path / "tokenizer.json"
    bare.write_text(json.dumps(config), encoding="utf-8")
    for pooling in ("mean", "cls"):
        got = OnnxEncoder(folded, bare, truncation_of(model_dir), pooling, 1).encode(["", "bread"], 2)
        assert np.isfinite(got).all() and not got[0].any() and got[1].any(), pooling
