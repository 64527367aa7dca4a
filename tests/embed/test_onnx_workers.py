"""The local model's encoder: passages embedded on several cores at once come back in their own
order, each the vector one core alone makes (real model, real onnxruntime)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tarsd.embed.folding import folded_model
from tarsd.embed.onnx_model import OnnxEncoder, truncation_of

PASSAGES = [
    "Sourdough needs a starter fed the evening before.",
    "The Zigbee dongle sits on the USB 2 port, away from USB 3 noise.",
    "短い日本語の文。",
    "x",
    " ".join(["A long passage about bread, ovens and the temperature of the kitchen."] * 30),
    "Home Assistant runs on the Raspberry Pi in the hall cupboard.",
    "Stretch and fold every thirty minutes for two hours, then shape the loaf.",
]


def encoder(model_dir: Path, tmp_path: Path, threads: int) -> OnnxEncoder:
    folded = folded_model(model_dir / "model.onnx", tmp_path / "folded")
    return OnnxEncoder(folded, model_dir / "tokenizer.json", truncation_of(model_dir), "mean", threads)


def test_passages_embedded_on_several_cores_match_one_core_in_order(model_dir: Path, tmp_path: Path):
    alone = encoder(model_dir, tmp_path, threads=1)
    together = encoder(model_dir, tmp_path, threads=3)
    assert alone.workers == 1 and together.workers == 3
    one_by_one = np.vstack([alone.encode([text], 1) for text in PASSAGES])
    for count in (1, 2, 3, len(PASSAGES)):  # fewer passages than workers, too
        at_once = together.encode(PASSAGES[:count], 1)
        assert at_once.shape == (count, one_by_one.shape[1])
        np.testing.assert_allclose(at_once, one_by_one[:count], rtol=0, atol=1e-5)
    # Distinct passages give distinct vectors: a mix-up of the order would show.
    assert np.linalg.matrix_rank(one_by_one) == len(PASSAGES)
