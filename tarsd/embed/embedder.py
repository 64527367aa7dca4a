"""Embedders: local ONNX (fastembed), Ollama, or none.

An embedder may be loading or unavailable (model missing, no network, Ollama down). Nothing
waits for it: keyword indexing and search go on, chunks are sized with the model's tokenizer
when it is on disk (an estimate otherwise), and the missing vectors are filled in by the
daemon's background rounds once a later attempt to load the model succeeds.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import platformdirs

from tarsd.config.settings import APP_NAME, EmbedderConfig
from tarsd.embed.folding import folded_model
from tarsd.embed.onnx_model import OnnxEncoder, pooling_of, truncation_of
from tarsd.markdown.chunker import HeuristicCounter, TokenCounter

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
# How long the check that the download site can be reached waits for a connection.
REACH_TIMEOUT_SECONDS = 10.0


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
    """Base: background loading with retry back-off, and the token counter chunks are sized by.

    Loading (importing onnxruntime, reading the model, perhaps downloading it) runs in a
    thread of its own, and no lock is held while it runs: searches, status and indexing only
    ever look at ``state`` and go on without vectors until it is ``ready``. A failed attempt
    is retried after ``retry_seconds``, doubling up to ``retry_max_seconds``; ``retry_now``
    (``tarsctl index``, SIGHUP) skips the wait.
    """

    kind = "none"

    def __init__(self, config: EmbedderConfig):
        self.config = config
        self.fingerprint: str | None = None
        self.dims = 0
        self.state = "loading"  # loading | ready | unavailable | disabled
        self.error: str | None = None
        self.failures = 0  # failed attempts since the last success
        self.loading_since: float | None = None
        self.next_retry_at: float | None = None  # wall clock, for status
        self._next_attempt = float("-inf")  # monotonic
        self._guard = threading.Condition()  # guards the state; never held while loading
        self._loader: threading.Thread | None = None
        self._listeners: list[Callable[[], None]] = []
        self._fallback_counter = HeuristicCounter()
        self.loading_what = "loading"  # what a load attempt does, for people: "loading", "downloading ..."

    @property
    def enabled(self) -> bool:
        return True

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from the loader thread) after every load attempt."""
        self._listeners.append(listener)

    def start_loading(self, force: bool = False) -> None:
        """Start a load attempt in the background unless one runs, the embedder is ready, or
        the back-off has not passed (``force`` skips the back-off)."""
        with self._guard:
            if self.state in ("ready", "disabled") or (self._loader is not None and self._loader.is_alive()):
                return
            if not force and time.monotonic() < self._next_attempt:
                return
            self.state, self.loading_since, self.next_retry_at = "loading", time.time(), None
            # A daemon thread: a download that never answers must not keep tarsd from exiting.
            self._loader = threading.Thread(target=self._attempt, name="embedder-load", daemon=True)
            self._loader.start()

    def retry_now(self) -> None:
        self.start_loading(force=True)

    def available(self) -> bool:
        """True when vectors can be made now. Never blocks: a due retry starts in the background."""
        if self.state != "ready":
            self.start_loading()
        return self.state == "ready"

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until a load attempt that started after this call ends (scripts and benchmarks;
        the daemon never waits). An attempt already running may predate a fix, so its failure
        is followed by a fresh attempt when one is due."""
        called = time.time()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.start_loading()
            with self._guard:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._guard.wait_for(lambda: self.state != "loading", left)
                fresh = self.loading_since is not None and self.loading_since >= called
                due = time.monotonic() >= self._next_attempt
            if self.state == "ready" or fresh or not due or (deadline is not None and time.monotonic() >= deadline):
                return self.state == "ready"

    def _attempt(self) -> None:
        started = time.monotonic()
        try:
            self._load()
            error = None
        except EmbedderUnavailable as exc:
            error = str(exc)
        except Exception as exc:  # onnxruntime, tokenizers and the hub raise their own types
            log.exception("loading the embedder failed")
            error = f"cannot load the embedder: {type(exc).__name__}: {exc}"
        with self._guard:
            if error is None:
                self.state, self.error, self.failures = "ready", None, 0
            else:
                self._schedule_retry(error)
            self._guard.notify_all()
        if error is None:
            log.info("embedder ready: %s (loaded in %.1f s)", self.fingerprint, time.monotonic() - started)
        else:
            log.warning("embedder unavailable: %s; %s", error, self.retry_hint())
        for listener in self._listeners:
            listener()

    def _schedule_retry(self, error: str) -> None:
        self.failures += 1
        delay = min(self.config.retry_max_seconds, self.config.retry_seconds * 2 ** (self.failures - 1))
        self.state, self.error = "unavailable", error
        self._next_attempt = time.monotonic() + delay
        self.next_retry_at = time.time() + delay

    def retry_hint(self) -> str:
        if self.next_retry_at is None:
            return "retrying now"
        wait = max(0.0, self.next_retry_at - time.time())
        when = f"{wait:.0f} s" if wait < 120 else f"{wait / 60:.0f} min"
        return f"next attempt in {when} (`tarsctl index` retries now)"

    def unavailable_reason(self) -> str:
        """Why there are no vectors right now, and what to do: for warnings and errors."""
        if self.state == "ready":
            return ""
        if self.state == "disabled":
            return self.error or "no embedder is configured"
        if self.state == "loading":
            since = time.time() - (self.loading_since or time.time())
            if self.failures and self.error:
                return f"retrying to load the embedding model ({since:.0f} s so far); the last attempt failed: {self.error}"
            return f"the embedding model is still {self.loading_what} ({since:.0f} s so far); try again in a moment"
        return f"{self.error}; {self.retry_hint()}"

    def mark_failed(self, error: str) -> None:
        """Called when an embed call fails: back off instead of failing every batch."""
        with self._guard:
            self._schedule_retry(error)
        log.warning("embedder failed: %s; %s", error, self.retry_hint())

    def counter(self) -> tuple[TokenCounter, int]:
        """The token counter and budget chunks must fit (context line included)."""
        return self._fallback_counter, self.config.max_tokens if self.config.max_tokens > 0 else DEFAULT_BUDGET

    def embed(self, texts: list[str]) -> np.ndarray:
        raise EmbedderUnavailable("no embedder is configured ([embedder] kind = 'none'): keyword search only")

    def _load(self) -> None:
        raise EmbedderUnavailable("no embedder is configured ([embedder] kind = 'none'): keyword search only")

    def describe(self) -> dict[str, object]:
        return {
            "state": self.state,
            "kind": self.kind,
            "model": self.config.model,
            "fingerprint": self.fingerprint or "",
            "dims": self.dims,
            "error": self.unavailable_reason(),
            "failures": self.failures,
            "next_retry_at": self.next_retry_at,
        }


class NoEmbedder(Embedder):
    """No vectors: [embedder] kind = "none", or a local model the memory budget has no room for
    (``kind`` stays "local" then, and ``reason`` says so)."""

    kind = "none"

    def __init__(self, config: EmbedderConfig, reason: str = "", kind: str = "none"):
        super().__init__(config)
        self.kind = kind
        self.state, self.error = "disabled", reason or "disabled: [embedder] kind = 'none' (keyword search only)"

    @property
    def enabled(self) -> bool:
        return False


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 (or another fastembed model) on onnxruntime, no torch."""

    kind = "local"

    def __init__(self, config: EmbedderConfig):
        super().__init__(config)
        self._model = None  # fastembed's, for models tars cannot pool itself
        self._encoder: OnnxEncoder | None = None
        self._counter: WordPieceCounter | None = None
        self._budget = DEFAULT_BUDGET
        # The tokenizer loads in a few tens of ms, the model in seconds (or never, offline):
        # take the tokenizer now when it is on disk, so chunk sizes are right from the first scan
        # and do not change (re-chunking the vault) when the model arrives.
        tokenizer = self._local_tokenizer()
        if tokenizer is not None:
            self._use_tokenizer(tokenizer.parent)
        elif not config.model_dir:
            self.loading_what = f"downloading (into {self._cache_dir()}; needs the internet once, or set TARS_MODEL_DIR)"

    def _cache_dir(self) -> Path:
        return Path(platformdirs.user_cache_dir(APP_NAME)) / "models"

    def _local_tokenizer(self) -> Path | None:
        if self.config.model_dir:
            candidate = Path(self.config.model_dir).expanduser() / "tokenizer.json"
            return candidate if candidate.is_file() else None
        found = sorted(self._cache_dir().rglob("tokenizer.json"), key=lambda p: "minilm" not in str(p).lower())
        return found[0] if found else None

    def _use_tokenizer(self, model_dir: Path) -> None:
        try:
            counter = WordPieceCounter(model_dir / "tokenizer.json", self.config.model)
        except Exception as exc:  # a damaged file: the estimate serves until the model loads
            log.warning("cannot read %s: %s", model_dir / "tokenizer.json", exc)
            return
        # The budget first: a sync reading counter() meanwhile never pairs the new counter with the old budget.
        self._budget = self._max_sequence(model_dir, self.config.model) - SPECIAL_TOKENS
        self._counter = counter

    def _load(self) -> None:
        model_dir = self._model_dir()
        if self._counter is None:
            self._use_tokenizer(model_dir)
        onnx = model_dir / "model.onnx" if (model_dir / "model.onnx").is_file() else next(iter(sorted(model_dir.rglob("*.onnx"))), None)
        if onnx is None:
            raise EmbedderUnavailable(f"no .onnx file in {model_dir}; delete it and restart to download the model again")
        threads = self.config.threads if self.config.threads > 0 else None
        pooling = pooling_of(model_dir, self.config.model)
        if pooling is None:  # a model tars does not know how to pool: fastembed runs it (with more memory)
            self._model = self._fastembed(model_dir, threads)
        else:
            try:
                folded = folded_model(onnx, self._cache_dir() / "folded")
                self._encoder = OnnxEncoder(folded, model_dir / "tokenizer.json", truncation_of(model_dir), pooling, threads)
            except Exception as exc:  # onnxruntime and tokenizers raise their own types
                raise EmbedderUnavailable(f"cannot load the embedding model from {model_dir}: {exc}") from exc
        probe = self._embed_now(["dimension probe"])
        self.dims = int(probe.shape[1])
        # The original file's size, not the folded one's: the vectors are the same.
        self.fingerprint = f"local:{self.config.model}:d{self.dims}:norm:{onnx.stat().st_size}"

    def _model_dir(self) -> Path:
        """The directory holding the model: the configured one, or fastembed's download in the
        user cache (downloaded now if it is not there)."""
        name = self.config.model
        if self.config.model_dir:
            model_dir = Path(self.config.model_dir).expanduser()
            missing = [f for f in ("model.onnx", "tokenizer.json", "tokenizer_config.json") if not (model_dir / f).is_file()]
            if missing:
                raise EmbedderUnavailable(
                    f"no embedding model at {model_dir} (missing {', '.join(missing)}); point [embedder] model_dir "
                    f"or TARS_MODEL_DIR at a directory holding {name} as ONNX, or unset it to download the model once"
                )
            return model_dir
        cache = self._cache_dir()
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:  # pragma: no cover - a broken install
            raise EmbedderUnavailable(f"fastembed is not installed ({exc}); reinstall tars with pip") from exc
        _quiet_fastembed()
        try:
            # The copy in the cache, if there is one: no network needed.
            TextEmbedding(model_name=name, cache_dir=str(cache), lazy_load=True, local_files_only=True)
        except Exception:  # fastembed raises bare Exceptions and ValueErrors: not downloaded yet
            # fastembed retries an unreachable site for about 40 s, with sleeps, while status can
            # only say "still downloading": a name that does not resolve or a refused connection
            # ends the attempt now, saying so and where a copy of the model comes from.
            self._check_download_site(name, cache)
            try:
                # lazy_load: fetch the files without loading the model.
                TextEmbedding(model_name=name, cache_dir=str(cache), lazy_load=True)
            except Exception as exc:
                raise EmbedderUnavailable(
                    f"cannot download the embedding model {name} into {cache}: {str(exc).rstrip('.')}; {_model_copy_hint(name, cache)}"
                ) from exc
        found = sorted((p for p in cache.rglob("tokenizer.json") if "folded" not in p.parts), key=lambda p: "minilm" not in str(p).lower())
        if not found:
            raise EmbedderUnavailable(f"the model {name} in {cache} has no tokenizer.json; delete {cache} and restart to download it again")
        return found[0].parent

    @staticmethod
    def _check_download_site(name: str, cache: Path) -> None:
        """Raise EmbedderUnavailable when the model hub's host name does not resolve or its port
        refuses: the download cannot work. A site that accepts but is slow is left to fastembed."""
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            return  # fastembed then looks in the cache only, and says so
        endpoint = constants.ENDPOINT
        site = urllib.parse.urlsplit(endpoint)
        host, port = site.hostname or "", site.port or (443 if site.scheme == "https" else 80)
        if site.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
            return  # through a proxy (HTTPS_PROXY): the proxy resolves the name, not this machine
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            reason = f"the name {host} does not resolve ({exc.strerror or exc}): no network, or no DNS"
            raise EmbedderUnavailable(f"cannot download the embedding model {name}: {reason}; {_model_copy_hint(name, cache)}") from exc
        try:
            family, kind, proto, _, address = addresses[0]
            with socket.socket(family, kind, proto) as probe:
                probe.settimeout(REACH_TIMEOUT_SECONDS)
                probe.connect(address)
        except TimeoutError:
            return  # slow, perhaps a proxy: fastembed tries, and status says it is downloading
        except OSError as exc:
            reason = f"{endpoint} cannot be reached ({exc.strerror or exc})"
            raise EmbedderUnavailable(f"cannot download the embedding model {name}: {reason}; {_model_copy_hint(name, cache)}") from exc

    def _fastembed(self, model_dir: Path, threads: int | None):
        from fastembed import TextEmbedding

        _quiet_fastembed()
        try:
            if self.config.model_dir:
                return TextEmbedding(model_name=self.config.model, specific_model_path=str(model_dir), threads=threads)
            return TextEmbedding(model_name=self.config.model, cache_dir=str(self._cache_dir()), threads=threads)
        except Exception as exc:
            raise EmbedderUnavailable(f"cannot load the embedding model from {model_dir}: {exc}") from exc

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
            raise EmbedderUnavailable(self.unavailable_reason())
        return self._embed_now(texts)

    def _embed_now(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        # Sorting by length keeps padding (and so memory and time) down inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        ordered = [texts[i] for i in order]
        if self._encoder is not None:
            produced = list(self._encoder.encode(ordered, self.config.batch_size))
        else:
            produced = list(self._model.embed(ordered, batch_size=self.config.batch_size))
        if len(produced) != len(texts):
            raise EmbedderUnavailable(f"the model returned {len(produced)} vectors for {len(texts)} texts")
        stacked = np.asarray(produced, dtype=np.float32)
        vectors = np.empty_like(stacked)
        vectors[order] = stacked
        return _normalise(vectors)


def _model_copy_hint(name: str, cache: Path) -> str:
    """Where a copy of the model comes from, for a machine that cannot download it."""
    from fastembed import TextEmbedding

    repo = next((m["sources"].get("hf") for m in TextEmbedding.list_supported_models() if m["model"] == name), None)
    source = f"the files of https://huggingface.co/{repo} (model.onnx and the tokenizer and config .json files)" if repo else name
    return (
        f"tarsd downloads it once (about 90 MB, into {cache}) when the internet is there; without it, set "
        f"[embedder] model_dir (or TARS_MODEL_DIR) to a copy of the model folder: {source} fetched on another "
        "machine, or the folder holding model.onnx in the tars model cache of a machine that downloaded it; "
        "`tarsctl index` retries at once"
    )


def _quiet_fastembed() -> None:
    # fastembed logs several ERROR lines per failed download; tars logs one line per attempt.
    from loguru import logger

    logger.disable("fastembed")


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
            raise EmbedderUnavailable(self.unavailable_reason())
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


def make_embedder(config: EmbedderConfig, keyword_only: str = "") -> Embedder:
    """The configured embedder; ``keyword_only`` (the memory budget's reason) leaves the local model out."""
    if config.kind == "local" and keyword_only:
        return NoEmbedder(config, keyword_only, kind="local")
    if config.kind == "local":
        return LocalEmbedder(config)
    if config.kind == "ollama":
        return OllamaEmbedder(config)
    return NoEmbedder(config)
