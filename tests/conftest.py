"""Shared fixtures: real SQLite + sqlite-vec, the real embedding model, temp vaults."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tarsd.config import load_config
from tarsd.embed import WordPieceCounter
from tarsd.engine import Engine

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TARS_SHARED", REPO.parent / "shared"))
MODEL_DIR = Path(os.environ.get("TARS_MODEL_DIR", SHARED / "models" / "all-MiniLM-L6-v2-int8"))
DENDRON = SHARED / "data" / "vaults" / "dendron-site"


@pytest.fixture(autouse=True)
def no_callers_tars_settings(monkeypatch):
    """The caller's TARS_* variables (TARS_MODEL_DIR, as the README allows, or a TARS_VAULT for
    their own daemon) never reach a test: each sets what it needs. The model folder was read above."""
    for name in [name for name in os.environ if name.startswith("TARS_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def model_dir() -> Path:
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.fail(f"the embedding model is missing at {MODEL_DIR}: put ../shared beside the repo or set TARS_MODEL_DIR")
    return MODEL_DIR


@pytest.fixture(scope="session")
def wordpiece(model_dir: Path) -> WordPieceCounter:
    return WordPieceCounter(model_dir / "tokenizer.json", "all-MiniLM-L6-v2")


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    path = tmp_path / "vault"
    path.mkdir()
    return path


def write(vault: Path, rel: str, text: str) -> Path:
    """Write a note (dedented), creating folders; returns its path."""
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def make_engine(tmp_path: Path, vault: Path, model_dir: Path):
    """Build an Engine on the temp vault; every engine made is closed at teardown."""
    engines: list[Engine] = []

    def factory(kind: str = "local", **overrides) -> Engine:
        settings = {
            "vault_path": vault,
            "index_db_path": tmp_path / "index" / "tars.sqlite3",
            "embedder_kind": kind,
            "embedder_model_dir": model_dir,
        }
        settings.update(overrides)
        config_file = tmp_path / "config.toml"
        config_file.touch()  # never the user's own config
        engine = Engine(load_config(path=config_file, env={}, **settings))
        engines.append(engine)
        return engine

    yield factory
    for engine in engines:
        engine.close()


@pytest.fixture
def fake_ollama():
    from fake_llm import FakeOllama

    with FakeOllama() as server:
        yield server


@pytest.fixture
def fake_anthropic():
    from fake_llm import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def start_daemon(tmp_path: Path, vault: Path, model_dir: Path):
    """Start real tarsd subprocesses on the temp vault; all are killed at teardown."""
    from daemon_harness import TarsDaemon

    started: list[TarsDaemon] = []

    def factory(embedder: str = "none", wait: bool = True, open_files: int | None = None, args: tuple[str, ...] = (), **extra_env: str):
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        daemon = TarsDaemon(vault, state, model_dir, embedder, extra_env)
        started.append(daemon)
        return daemon.start(wait=wait, open_files=open_files, args=args)

    yield factory
    for daemon in started:
        daemon.cleanup()


@pytest.fixture
def http_daemon(start_daemon, fake_ollama):
    """Start a real tarsd with its HTTP listener on (a free port) and chat through the fake Ollama;
    returns a web_harness.Web for it."""
    from web_harness import Web

    def factory(**extra_env: str):
        env = {
            "TARS_HTTP_ENABLED": "true",
            "TARS_HTTP_PORT": "0",
            "TARS_CHAT_OLLAMA_HOST": fake_ollama.url,
            "TARS_CHAT_OLLAMA_MODEL": "fake-chat",
            **extra_env,
        }
        return Web(start_daemon(**env))

    return factory


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: str = "4m"):
    """A small tmpfs mounted at ``mount_point``: a real "disk full" that a test can fill and free."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (CI runs as root): the disk-full behaviour is not tested here")
    mount_point.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}): the disk-full behaviour is not tested here")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system holding ``directory`` to the last byte; returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler
