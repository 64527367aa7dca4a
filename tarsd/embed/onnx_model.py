"""The local embedding model, run on onnxruntime: tokenize, encode, mean-pool (normalising is
embed.py's).

fastembed fetches the model once; tars runs it itself, for memory: the model it runs is the
one folding.py made of the download (its int8 weights folded to float once, the embedding
tables kept int8), the same vectors in about 73 MB instead of about 190.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tarsd.config.budget import usable_cores


class OnnxEncoder:
    """Pooled token embeddings of a sentence-transformers model exported to ONNX: the mean
    over the tokens (``pooling="mean"``) or the first token's (``"cls"``)."""

    def __init__(self, model: Path, tokenizer_file: Path, max_tokens: int, pooling: str, threads: int | None):
        if pooling not in ("mean", "cls"):
            raise ValueError(f"unknown pooling {pooling!r}")
        self.pooling = pooling
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_tokens)
        pad = self.tokenizer.token_to_id("[PAD]")
        self.tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        options = ort.SessionOptions()
        # Without the arena, activations are freed after each run instead of kept at their
        # largest batch's size; heap.py hands them back once the daemon is idle.
        options.enable_cpu_mem_arena = False
        # Each run on one thread, and as many runs at once as there are cores (one session: the
        # weights once). onnxruntime's own threads spin while they wait for work: beside a hybrid
        # search's keyword query they took the CPU it needed (10,000 notes, bench/search_latency.py:
        # hybrid p50 35 ms with one 2-thread run, 24 ms with 1-thread runs). A first embedding
        # goes 1.09x as fast this way (bench/index_cost.py), with the same vectors; it peaks about
        # 100 MB higher, a malloc arena per thread (2 in all under a small budget, heap.py).
        # Batches of more than one passage were slower (the table in index_cost.py). A lone query
        # runs on one core.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.workers = max(1, threads if threads is not None else usable_cores())
        # onnxruntime fuses each residual Add and LayerNormalization into SkipLayerNormalization,
        # whose CPU kernel took 560 ms of 100 SciFact passages where the two unfused took 260:
        # without the fusion the model runs 1.08x as fast (onnxruntime 1.32, an Intel Xeon), with
        # vectors at cosine 0.9999998 or more to the fused ones.
        self.session = ort.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="embed") if self.workers > 1 else None

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """One vector per text (not normalised), in order: the texts dealt out to the workers
        in turn (sorted by length, each gets a fair share of long ones)."""
        if self._pool is None or len(texts) < 2:
            return self._encode_one_thread(texts, batch_size)
        shares = [texts[i :: self.workers] for i in range(self.workers)]
        parts = list(self._pool.map(lambda share: self._encode_one_thread(share, batch_size), [share for share in shares if share]))
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for i, part in enumerate(parts):
            out[i :: self.workers] = part
        return out

    def _encode_one_thread(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = []
        for start in range(0, len(texts), max(1, batch_size)):
            encoded = self.tokenizer.encode_batch(texts[start : start + batch_size])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {name: value for name, value in feed.items() if name in self.inputs})[0]
            weights = mask[..., None].astype(np.float32)
            tokens = weights.sum(axis=1)  # per text, shape (batch, 1)
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                pooled = (hidden * weights).sum(axis=1) / np.maximum(tokens, 1e-9)
            # A text of no tokens (a tokenizer that adds no [CLS]/[SEP]) has every key masked:
            # its rows are the padding's, or NaN where a model masks with -inf (folding.py drops
            # the guard). Its vector is zero.
            pooled[tokens[:, 0] == 0] = 0.0
            out.append(pooled)
        return np.vstack(out).astype(np.float32, copy=False)


# Pooling of models whose download carries no pooling config (fastembed's ONNX exports).
KNOWN_POOLING = {
    "sentence-transformers/all-MiniLM-L6-v2": "mean",
    "sentence-transformers/all-MiniLM-L12-v2": "mean",
    "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2": "mean",
    "BAAI/bge-small-en-v1.5": "cls",
    "BAAI/bge-base-en-v1.5": "cls",
}


def pooling_of(model_dir: Path, name: str) -> str | None:
    """How the model pools token vectors into one, from its sentence-transformers pooling
    config, else from the table above; None when unknown (fastembed then runs the model)."""
    for config in (model_dir / "pooling_config.json", model_dir / "1_Pooling" / "config.json"):
        try:
            modes = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(modes, dict):
            continue
        chosen = [mode for mode, key in (("mean", "pooling_mode_mean_tokens"), ("cls", "pooling_mode_cls_token")) if modes.get(key) is True]
        others = [key for key, value in modes.items() if key.startswith("pooling_mode_") and value is True]
        return chosen[0] if len(chosen) == 1 and len(others) == 1 else None
    return KNOWN_POOLING.get(name)


def truncation_of(model_dir: Path) -> int:
    """Where the tokenizer truncates, as fastembed does it (so vectors match a fastembed
    index): the stricter of model_max_length and max_length, 512 when neither is set."""
    try:
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    limits = [
        v
        for v in (config.get("model_max_length"), config.get("max_length"))
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 20
    ]
    return min(limits) if limits else 512
