"""Shared fixtures: real SQLite + sqlite-vec, the real embedding model, temp vaults."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.paths import MODEL_DIR
from harness.progress import pytest_addoption, pytest_configure  # noqa: F401 - hooks: progress lines for long runs
from tarsd.config.settings import load_config
from tarsd.embed.embedder import WordPieceCounter
from tarsd.search.engine import Engine

LOG_TAIL_LINES = 40


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test, so fixtures can tell at teardown that it failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


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
    from harness.fake_llm import FakeOllama

    with FakeOllama() as server:
        yield server


@pytest.fixture
def fake_anthropic():
    from harness.fake_llm import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def start_daemon(request, tmp_path: Path, vault: Path, model_dir: Path):
    """Start real tarsd subprocesses on the temp vault; all are killed at teardown."""
    from harness.daemon import TarsDaemon

    started: list[TarsDaemon] = []

    def factory(
        embedder: str = "none",
        wait: bool = True,
        open_files: int | None = None,
        args: tuple[str, ...] = (),
        cgroup=None,
        scanned: bool = True,
        **extra_env: str,
    ):
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        daemon = TarsDaemon(vault, state, model_dir, embedder, extra_env)
        started.append(daemon)
        return daemon.start(wait=wait, open_files=open_files, args=args, cgroup=cgroup, scanned=scanned)

    yield factory
    call = getattr(request.node, "report_call", None)
    for daemon in started:
        if call is not None and call.failed and daemon.log.exists():
            # A daemon test that fails under load is hard to reproduce: its log says what tarsd was doing.
            tail = daemon.log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
            print(f"--- the last {len(tail)} lines of {daemon.log} ---", *tail, sep="\n", file=sys.stderr)
        daemon.cleanup()


@pytest.fixture
def http_daemon(start_daemon, fake_ollama):
    """Start a real tarsd with its HTTP listener on (a free port) and chat through the fake Ollama;
    returns a web_harness.Web for it."""
    from harness.web import Web

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
