"""Embedders: local ONNX (fastembed), Ollama, or none.

An embedder may be unavailable (model missing, Ollama down). Keyword search never depends
on it: the indexer records the reason, keeps chunking with an estimated token count, and
fills in the missing vectors once a later attempt to reach the embedder succeeds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import numpy as np
import platformdirs

from .chunker import HeuristicCounter, TokenCounter
from .config import APP_NAME, EmbedderConfig

log = logging.getLogger(__name__)

# Sequence lengths the models were trained with; tokenizer configs often claim more (512).
KNOWN_MAX_SEQUENCE = {
    "sentence-transformers/all-MiniLM-L6-v2": 256,
    "sentence-transformers/all-MiniLM-L12-v2": 256,
    "BAAI/bge-small-en-v1.5": 512,
    "nomic-embed-text": 2048,
}
DEFAULT_BUDGET = 254  # all-MiniLM-L6-v2's 256 less [CLS] and [SEP]
SPECIAL_TOKENS = 2


class EmbedderUnavailable(Exception):
    """The embedder cannot embed right now; the message says why and what to do."""


class WordPieceCounter:
    """Exact token counts from the model's own tokenizer (no special tokens, no truncation)."""

    def __init__(self, tokenizer_file: Path, name: str):
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.fingerprint = f"tokenizer:{name}"
        self.additive = True  # WordPiece splits at whitespace first: counts of lines add up
        self.exact_ends = True

    def count(self, texts: list[str]) -> list[int]:
        # encode_batch's thread pool only pays off for many texts at once.
        if len(texts) >= 16:
            return [len(e.ids) for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]
        encode = self._tokenizer.encode
        return [len(encode(text, add_special_tokens=False).ids) for text in texts]

    def token_ends(self, text: str) -> list[int]:
        return [end for _, end in self._tokenizer.encode(text, add_special_tokens=False).offsets]


class Embedder:
    """Base: lazy loading with retry back-off, and the token counter chunks are sized by."""

    kind = "none"

    def __init__(self, config: EmbedderConfig):
        self.config = config
        self.fingerprint: str | None = None
        self.dims = 0
        self.error: str | None = None
        self._ready = False
        self._last_attempt = float("-inf")
        self._lock = threading.Lock()
        self._fallback_counter = HeuristicCounter()

    @property
    def enabled(self) -> bool:
        return True

    def available(self) -> bool:
        """Load (or reach) the embedder if needed; at most one attempt per retry interval."""
        with self._lock:
            if self._ready:
                return True
            now = time.monotonic()
            if now - self._last_attempt < self.config.retry_seconds:
                return False
            self._last_attempt = now
            try:
                self._load()
            except EmbedderUnavailable as exc:
                if self.error != str(exc):
                    log.warning("embedder unavailable: %s", exc)
                self.error = str(exc)
                return False
            self._ready, self.error = True, None
            log.info("embedder ready: %s", self.fingerprint)
            return True

    def mark_failed(self, error: str) -> None:
        """Called when an embed call fails: retry later instead of failing every batch."""
        with self._lock:
            self._ready, self.error, self._last_attempt = False, error, time.monotonic()

    def counter(self) -> tuple[TokenCounter, int]:
        """The token counter and budget chunks must fit (context line included)."""
        return self._fallback_counter, self.config.max_tokens if self.config.max_tokens > 0 else DEFAULT_BUDGET

    def embed(self, texts: list[str]) -> np.ndarray:
        raise EmbedderUnavailable("no embedder is configured ([embedder] kind = 'none'): keyword search only")

    def _load(self) -> None:
        raise EmbedderUnavailable("no embedder is configured ([embedder] kind = 'none'): keyword search only")

    def describe(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "model": self.config.model,
            "available": self._ready,
            "fingerprint": self.fingerprint,
            "dims": self.dims,
            "error": self.error,
        }


class NoEmbedder(Embedder):
    kind = "none"

    @property
    def enabled(self) -> bool:
        return False

    def available(self) -> bool:
        self.error = "disabled: [embedder] kind = 'none' (keyword search only)"
        return False


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 (or another fastembed model) on onnxruntime, no torch."""

    kind = "local"

    def __init__(self, config: EmbedderConfig):
        super().__init__(config)
        self._model = None
        self._counter: WordPieceCounter | None = None
        self._budget = DEFAULT_BUDGET

    def _load(self) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:  # pragma: no cover - a broken install
            raise EmbedderUnavailable(f"fastembed is not installed ({exc}); reinstall tars with pip") from exc
        name = self.config.model
        threads = self.config.threads if self.config.threads > 0 else None
        if self.config.model_dir:
            model_dir = Path(self.config.model_dir).expanduser()
            missing = [f for f in ("model.onnx", "tokenizer.json", "tokenizer_config.json") if not (model_dir / f).is_file()]
            if missing:
                raise EmbedderUnavailable(
                    f"no embedding model at {model_dir} (missing {', '.join(missing)}); point [embedder] model_dir "
                    f"or TARS_MODEL_DIR at a directory holding {name} as ONNX, or unset it to download the model once"
                )
            try:
                self._model = TextEmbedding(model_name=name, specific_model_path=str(model_dir), threads=threads)
            except Exception as exc:  # fastembed raises bare Exceptions and ValueErrors
                raise EmbedderUnavailable(f"cannot load the embedding model from {model_dir}: {exc}") from exc
        else:
            cache = Path(platformdirs.user_cache_dir(APP_NAME)) / "models"
            try:
                self._model = TextEmbedding(model_name=name, cache_dir=str(cache), threads=threads)
            except Exception as exc:
                raise EmbedderUnavailable(
                    f"cannot load or download the embedding model {name} into {cache}: {exc}; "
                    "connect to the internet once, or set TARS_MODEL_DIR to a local copy"
                ) from exc
            found = sorted(cache.rglob("tokenizer.json"), key=lambda p: "minilm" not in str(p).lower())
            if not found:
                raise EmbedderUnavailable(
                    f"the model {name} in {cache} has no tokenizer.json; delete {cache} and restart to download it again"
                )
            model_dir = found[0].parent
        self._counter = WordPieceCounter(model_dir / "tokenizer.json", name)
        self._budget = self._max_sequence(model_dir, name) - SPECIAL_TOKENS
        probe = self._embed_now(["dimension probe"])
        self.dims = int(probe.shape[1])
        onnx = next(model_dir.glob("*.onnx"), None)
        size = onnx.stat().st_size if onnx else 0
        self.fingerprint = f"local:{name}:d{self.dims}:norm:{size}"

    @staticmethod
    def _max_sequence(model_dir: Path, name: str) -> int:
        if name in KNOWN_MAX_SEQUENCE:
            return KNOWN_MAX_SEQUENCE[name]
        for file, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
            try:
                value = json.loads((model_dir / file).read_text(encoding="utf-8")).get(key)
            except (OSError, ValueError):
                continue
            if isinstance(value, int) and 0 < value <= 8192:
                return value
        return 512

    def counter(self) -> tuple[TokenCounter, int]:
        if self._counter is not None:
            budget = self._budget if self.config.max_tokens <= 0 else min(self._budget, self.config.max_tokens)
            return self._counter, budget
        return super().counter()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.available():
            raise EmbedderUnavailable(self.error or "embedder unavailable")
        return self._embed_now(texts)

    def _embed_now(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        # Sorting by length keeps padding (and so memory and time) down inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        produced = list(self._model.embed([texts[i] for i in order], batch_size=self.config.batch_size))
        if len(produced) != len(texts):
            raise EmbedderUnavailable(f"the model returned {len(produced)} vectors for {len(texts)} texts")
        stacked = np.asarray(produced, dtype=np.float32)
        vectors = np.empty_like(stacked)
        vectors[order] = stacked
        return _normalise(vectors)


class OllamaEmbedder(Embedder):
    """An Ollama embedding model through the official client."""

    kind = "ollama"

    def __init__(self, config: EmbedderConfig):
        super().__init__(config)
        import ollama

        self._client = ollama.Client(host=config.ollama_host, timeout=120)

    def _load(self) -> None:
        vectors = self._call(["dimension probe"])
        self.dims = int(vectors.shape[1])
        self.fingerprint = f"ollama:{self.config.model}:d{self.dims}:norm"

    def counter(self) -> tuple[TokenCounter, int]:
        # Ollama's tokenizer is not visible from here: estimate generously and ask Ollama to
        # fail rather than truncate (truncate=False), so nothing is cut silently.
        if self.config.max_tokens > 0:
            return self._fallback_counter, self.config.max_tokens
        return self._fallback_counter, KNOWN_MAX_SEQUENCE.get(self.config.model.split(":")[0], 512) - SPECIAL_TOKENS

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.available():
            raise EmbedderUnavailable(self.error or "embedder unavailable")
        try:
            return self._call(texts)
        except EmbedderUnavailable as exc:
            self.mark_failed(str(exc))
            raise

    def _call(self, texts: list[str]) -> np.ndarray:
        import httpx
        import ollama

        host, model = self.config.ollama_host, self.config.model
        try:
            response = self._client.embed(model=model, input=texts, truncate=False)
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise EmbedderUnavailable(f"Ollama at {host} does not have the model {model}: run `ollama pull {model}`") from exc
            raise EmbedderUnavailable(f"Ollama at {host} refused to embed with {model}: {exc.error}") from exc
        except (httpx.HTTPError, ConnectionError, OSError) as exc:
            raise EmbedderUnavailable(
                f"cannot reach Ollama at {host} ({exc}); start it with `ollama serve` or set [embedder] ollama_host"
            ) from exc
        embeddings = list(response.embeddings or [])
        if len(embeddings) != len(texts):
            raise EmbedderUnavailable(f"Ollama returned {len(embeddings)} embeddings for {len(texts)} inputs")
        return _normalise(np.asarray(embeddings, dtype=np.float32))


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32, copy=False)


def make_embedder(config: EmbedderConfig) -> Embedder:
    if config.kind == "local":
        return LocalEmbedder(config)
    if config.kind == "ollama":
        return OllamaEmbedder(config)
    return NoEmbedder(config)
