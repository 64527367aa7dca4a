"""tarsctl doctor on real setups: a healthy one (a real tarsd with the real model, a fake Ollama on
127.0.0.1), then each broken setup it claims to detect, one at a time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.daemon import wait_for
from harness.fake_graph import FakeGraph
from harness.fake_llm import FakeAnthropic, FakeOllama
from harness.paths import REPO
from harness.user_env import closed_port_url, isolated_env
from harness.vault_files import write

CHECKS = ("python", "sqlite", "config", "vault", "database", "model", "socket", "daemon", "service", "chat", "routines")


def doctor(env: dict[str, str], *extra: str) -> tuple[int, dict[str, list[dict]], str]:
    result = subprocess.run(
        [sys.executable, "-m", "tarsctl.cli", "doctor", "--json", *extra], env=env, capture_output=True, text=True, timeout=120
    )
    report = json.loads(result.stdout)
    assert report["ok"] == (result.returncode == 0)
    checks: dict[str, list[dict]] = {}
    for check in report["checks"]:
        checks.setdefault(check["name"], []).append(check)
    return result.returncode, checks, result.stdout


def status(checks: dict[str, list[dict]], name: str) -> str:
    """The worst status among a check's lines."""
    found = {c["status"] for c in checks[name]}
    return next(s for s in ("problem", "warn", "ok") if s in found)


def text(checks: dict[str, list[dict]], name: str) -> str:
    return " ".join(c["summary"] + " " + c["fix"] for c in checks[name])


@pytest.fixture
def ollama():
    with FakeOllama(chat_models=("fake-chat",)) as server:
        yield server


@pytest.fixture
def healthy(tmp_path: Path, vault: Path, model_dir: Path, ollama: FakeOllama, start_daemon):
    """A running tarsd with the real model, and the environment a user's shell would have."""
    write(vault, "Memory.md", "# Me\n\n- I bake sourdough\n")
    write(vault, "Sourdough.md", "# Sourdough\n\nBake at 250 C with steam.\n")
    daemon = start_daemon("local", TARS_CHAT_OLLAMA_HOST=ollama.url, TARS_CHAT_OLLAMA_MODEL="fake-chat")
    # doctor judges the running tarsd's model: a model still loading is a warning, not yet healthy.
    wait_for(lambda: daemon.status().embedder.state == "ready", "the model to load")
    return daemon, isolated_env(tmp_path, daemon.env, TARS_VAULT=str(vault))


def test_a_healthy_setup_is_all_ok_and_exits_0(healthy, vault: Path):
    daemon, env = healthy
    code, checks, _ = doctor(env)
    assert code == 0, checks
    assert set(checks) == set(CHECKS)
    for name in CHECKS:
        if name != "service":
            assert status(checks, name) == "ok", checks[name]
    assert "2 notes" in text(checks, "vault")
    assert f"answers: {vault}" in text(checks, "daemon")
    assert "has the chat model fake-chat" in text(checks, "chat")
    # No service file in this temporary home: said, with the command that installs one, but not a blocker.
    assert status(checks, "service") == "warn" and "tarsctl service install" in text(checks, "service")
    assert vault.joinpath("Memory.md").exists() and not list(vault.glob(".tars-doctor-*"))  # the write probe cleans up


def test_the_demos_second_shell_judges_the_running_daemon(tmp_path: Path, start_daemon):
    """scripts/demo.sh runs `tarsd --vault <copy of examples/vault>` with the local model; a second
    shell has no TARS_* settings, no config file, no model in its cache and no network. doctor
    judges what that tarsd serves: its vault, its database and its model, not the empty config."""
    shutil.copytree(REPO / "examples" / "vault", tmp_path / "vault", dirs_exist_ok=True)
    runtime = Path(tempfile.mkdtemp(prefix="tars-rt-", dir="/tmp"))  # where both find the default socket
    try:
        daemon = start_daemon("local", TARS_SOCKET=str(runtime / "tars" / "tarsd.sock"))
        (tmp_path / "shell").mkdir()
        shell = isolated_env(tmp_path / "shell", XDG_RUNTIME_DIR=str(runtime), HF_ENDPOINT=closed_port_url())
        del shell["TARS_CONFIG"], shell["TARS_SOCKET"]
        assert not [name for name in shell if name.startswith("TARS_")]

        code, checks, _ = doctor(shell)
        assert code == 0, checks
        assert "the vault of the running tarsd" in text(checks, "config")
        assert status(checks, "vault") == "ok" and f"{daemon.vault}:" in text(checks, "vault")
        assert "(named by the running tarsd)" in text(checks, "vault")
        assert status(checks, "database") == "ok" and daemon.env["TARS_DB"] in text(checks, "database")
        assert status(checks, "model") in ("ok", "warn") and "in the running tarsd" in text(checks, "model")
        assert status(checks, "daemon") == "ok" and f"answers: {daemon.vault}" in text(checks, "daemon")

        screen = subprocess.run([sys.executable, "-m", "tarsctl.cli", "doctor"], env=shell, capture_output=True, text=True, timeout=120)
        assert screen.returncode == 0 and not [line for line in screen.stdout.splitlines() if line.startswith("problem")], screen.stdout

        # The vault folder vanishes under the running tarsd: doctor says so and exits 1.
        daemon.vault.rename(tmp_path / "moved away")
        code, checks, _ = doctor(shell)
        assert code == 1 and status(checks, "daemon") == "problem" and f"{daemon.vault} is no longer there" in text(checks, "daemon")
        assert status(checks, "vault") == "problem" and "put the folder back" in text(checks, "vault")
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_screen_says_problem_and_the_fix_on_each_line(tmp_path: Path, vault: Path, model_dir: Path):
    env = isolated_env(tmp_path, TARS_VAULT=str(tmp_path / "no such vault"), TARS_MODEL_DIR=str(model_dir))
    result = subprocess.run([sys.executable, "-m", "tarsctl.cli", "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    vault_line = next(i for i, line in enumerate(lines) if line.split()[:2] == ["problem", "vault"])
    assert "does not exist" in lines[vault_line] and lines[vault_line + 1].strip().startswith("fix: create it")
    assert lines[-1].endswith("tars cannot work normally until the problems are fixed")


def test_no_vault(tmp_path: Path, model_dir: Path):
    code, checks, _ = doctor(isolated_env(tmp_path, TARS_MODEL_DIR=str(model_dir)))
    assert code == 1
    assert status(checks, "vault") == "problem" and "no vault configured" in text(checks, "vault")
    code, checks, _ = doctor(isolated_env(tmp_path, TARS_VAULT=str(tmp_path / "gone"), TARS_MODEL_DIR=str(model_dir)))
    assert code == 1 and "does not exist" in text(checks, "vault")


@contextmanager
def unwritable(folder: Path):
    """Permission bits stop ordinary users; root (as in CI containers) needs the immutable flag."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        undo = lambda: folder.chmod(0o755)
    else:
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"root without the right to set the immutable flag ({done.stderr.strip()}): no unwritable folder possible")
        undo = lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)
    try:
        with pytest.raises(PermissionError):
            (folder / "probe").touch()
        yield
    finally:
        undo()


def test_unwritable_vault(tmp_path: Path, vault: Path, model_dir: Path):
    write(vault, "note.md", "# Note\n")
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir))
    with unwritable(vault):
        code, checks, _ = doctor(env)
    assert code == 1
    assert status(checks, "vault") == "problem"
    assert "not writable" in text(checks, "vault") and "chmod -R u+w" in text(checks, "vault")


def test_unwritable_database_folder_or_a_database_inside_the_vault(tmp_path: Path, vault: Path, model_dir: Path):
    locked = tmp_path / "locked"
    locked.mkdir()
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir), TARS_DB=str(locked / "index" / "tars.sqlite3"))
    with unwritable(locked):
        code, checks, _ = doctor(env)
    assert code == 1 and status(checks, "database") == "problem" and f"cannot write {locked / 'index'}" in text(checks, "database")
    env["TARS_DB"] = str(vault / "index.sqlite3")
    _, checks, _ = doctor(env)
    assert status(checks, "database") == "problem" and "inside the vault" in text(checks, "database")


def test_the_database_size_counts_its_write_ahead_log_as_status_does(tmp_path: Path, vault: Path, model_dir: Path):
    """Issue 37: doctor said "0.0 MB" where status said 2.1 MB: a fresh index lives mostly in its WAL."""
    index = tmp_path / "index"
    index.mkdir()
    (index / "tars.sqlite3").write_bytes(b"\0" * 4096)
    (index / "tars.sqlite3-wal").write_bytes(b"\0" * 2_100_000)
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir), TARS_DB=str(index / "tars.sqlite3"))
    _, checks, _ = doctor(env)
    assert f"{index / 'tars.sqlite3'} (2.1 MB)" in text(checks, "database"), text(checks, "database")


def test_sqlite_vec_that_cannot_load(tmp_path: Path, vault: Path, model_dir: Path):
    """A sqlite-vec package whose extension binary is missing (a wheel for another machine, say)."""
    broken = tmp_path / "broken" / "sqlite_vec"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('def loadable_path():\n    return "/nonexistent/vec0"\n')
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir), PYTHONPATH=str(broken.parent))
    code, checks, _ = doctor(env)
    assert code == 1 and status(checks, "sqlite") == "problem"
    assert "cannot load the sqlite-vec extension" in text(checks, "sqlite") and "reinstall" in text(checks, "sqlite")


def test_missing_model(tmp_path: Path, vault: Path):
    empty = tmp_path / "model"
    empty.mkdir()
    code, checks, _ = doctor(isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(empty)))
    assert code == 1 and status(checks, "model") == "problem"
    assert "missing model.onnx, tokenizer.json, tokenizer_config.json" in text(checks, "model")


def test_model_not_downloaded_depends_on_reaching_the_download_site(tmp_path: Path, vault: Path, ollama: FakeOllama):
    # No model folder and an empty cache: tarsd would download it, if the site can be reached.
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), HF_ENDPOINT=closed_port_url())
    code, checks, _ = doctor(env)
    assert code == 1 and status(checks, "model") == "problem"
    assert "cannot be reached" in text(checks, "model") and "TARS_MODEL_DIR" in text(checks, "model")

    env["HF_ENDPOINT"] = ollama.url  # any HTTP server answering: the network is there
    code, checks, _ = doctor(env)
    assert status(checks, "model") == "ok" and "fetches it" in text(checks, "model")

    downloaded = Path(env["XDG_CACHE_HOME"]) / "tars" / "models" / "models--qdrant--all-MiniLM-L6-v2-onnx" / "snapshots" / "abc"
    downloaded.mkdir(parents=True)
    (downloaded / "model.onnx").write_bytes(b"onnx")
    env["HF_ENDPOINT"] = closed_port_url()
    code, checks, _ = doctor(env)
    assert status(checks, "model") == "ok" and "downloaded in" in text(checks, "model")


def test_daemon_down(tmp_path: Path, vault: Path, model_dir: Path):
    run_dir = tempfile.mkdtemp(prefix="tars-", dir="/tmp")
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir), TARS_SOCKET=f"{run_dir}/tarsd.sock")
    code, checks, _ = doctor(env)
    os.rmdir(run_dir)
    assert code == 1
    assert status(checks, "socket") == "ok"
    assert status(checks, "daemon") == "problem" and "does not answer" in text(checks, "daemon")
    assert "tarsctl service install" in text(checks, "daemon")


def test_unreachable_or_incomplete_ollama(tmp_path: Path, vault: Path, model_dir: Path, ollama: FakeOllama):
    env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir), TARS_CHAT_OLLAMA_HOST=closed_port_url())
    code, checks, _ = doctor(env)
    # Search, memory and MCP work without chat: a warning, never a problem of its own.
    assert status(checks, "chat") == "warn" and "chat only" in text(checks, "chat")
    assert "Ollama is not reachable" in text(checks, "chat") and "ollama serve" in text(checks, "chat")

    env.update(TARS_CHAT_OLLAMA_HOST=ollama.url, TARS_CHAT_OLLAMA_MODEL="llama3.2")
    code, checks, _ = doctor(env)
    assert status(checks, "chat") == "warn" and "ollama pull llama3.2" in text(checks, "chat")

    # Ollama as the embedder: the embedding model must be pulled too.
    env.update(TARS_EMBEDDER="ollama", TARS_OLLAMA_HOST=ollama.url, TARS_EMBEDDER_MODEL="fake-embed")
    _, checks, _ = doctor(env)
    assert status(checks, "model") == "ok" and "has the embedding model fake-embed" in text(checks, "model")
    env["TARS_EMBEDDER_MODEL"] = "nomic-embed-text"
    _, checks, _ = doctor(env)
    assert status(checks, "model") == "problem" and "ollama pull nomic-embed-text" in text(checks, "model")


def test_anthropic_key_model_and_reachability(tmp_path: Path, vault: Path, model_dir: Path):
    key_file = tmp_path / "anthropic_key"
    with FakeAnthropic(models=("claude-test",), api_key="sk-right") as anthropic:
        env = isolated_env(
            tmp_path,
            TARS_VAULT=str(vault),
            TARS_MODEL_DIR=str(model_dir),
            TARS_CHAT_PROVIDER="anthropic",
            TARS_CHAT_ANTHROPIC_BASE_URL=anthropic.url,
            TARS_CHAT_ANTHROPIC_MODEL="claude-test",
            TARS_CHAT_ANTHROPIC_KEY_FILE=str(key_file),
        )
        _, checks, _ = doctor(env)
        assert status(checks, "chat") == "warn" and "no Anthropic API key" in text(checks, "chat")

        key_file.write_text("sk-wrong\n")
        _, checks, _ = doctor(env)
        assert status(checks, "chat") == "warn" and "rejected the API key" in text(checks, "chat")

        key_file.write_text("sk-right\n")
        _, checks, _ = doctor(env)
        assert status(checks, "chat") == "ok" and f"key from {key_file}" in text(checks, "chat")
        assert anthropic.requests[-1][1]["headers"]["x-api-key"] == "sk-right"

        # The key only in this shell: it works here, but a service would not see it.
        _, checks, _ = doctor({**env, "TARS_CHAT_ANTHROPIC_KEY_FILE": str(tmp_path / "none"), "ANTHROPIC_API_KEY": "sk-right"})
        assert status(checks, "chat") == "warn" and "a service does not see" in text(checks, "chat")

        env["TARS_CHAT_ANTHROPIC_MODEL"] = "claude-retired"
        _, checks, _ = doctor(env)
        assert status(checks, "chat") == "warn" and "no model claude-retired" in text(checks, "chat")

    env["TARS_CHAT_ANTHROPIC_BASE_URL"] = closed_port_url()
    code, checks, _ = doctor(env)
    assert status(checks, "chat") == "warn" and "not reachable" in text(checks, "chat")


def test_unsafe_socket_folders(tmp_path: Path, vault: Path, model_dir: Path):
    shared = Path(tempfile.mkdtemp(prefix="tars-shared-", dir="/tmp"))
    try:
        shared.chmod(0o777)  # writable by anyone, no sticky bit
        env = isolated_env(tmp_path, TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir), TARS_SOCKET=f"{shared}/tarsd.sock")
        code, checks, _ = doctor(env)
        assert code == 1 and status(checks, "socket") == "problem"
        assert "writable by everyone" in text(checks, "socket") and f"chmod 700 {shared}" in text(checks, "socket")

        shared.chmod(0o1777)  # like /tmp: fine above a private folder, not as the socket's own folder
        _, checks, _ = doctor(env)
        assert status(checks, "socket") == "problem" and "private subdirectory" in text(checks, "socket")

        env["TARS_SOCKET"] = f"{shared}/mine/tarsd.sock"  # tarsd will create "mine" with mode 0700
        _, checks, _ = doctor(env)
        assert status(checks, "socket") == "ok"

        env["TARS_SOCKET"] = "/tmp/" + "x" * 120 + "/tarsd.sock"
        _, checks, _ = doctor(env)
        assert status(checks, "socket") == "problem" and "byte limit" in text(checks, "socket")
    finally:
        shared.chmod(0o700)
        os.rmdir(shared)


def test_a_socket_set_only_in_the_config_file_is_one_tarsctl_does_not_see(tmp_path: Path, vault: Path, model_dir: Path):
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nsocket = "{tmp_path}/elsewhere.sock"\n')
    env = isolated_env(tmp_path, TARS_CONFIG=str(config), TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir))
    del env["TARS_SOCKET"]
    _, checks, _ = doctor(env)
    assert status(checks, "socket") == "warn" and f"export TARS_SOCKET={tmp_path}/elsewhere.sock" in text(checks, "socket")


def test_a_daemon_serving_another_vault(tmp_path: Path, vault: Path, model_dir: Path, start_daemon):
    daemon = start_daemon()
    other = tmp_path / "other vault"
    other.mkdir()
    _, checks, _ = doctor(isolated_env(tmp_path, daemon.env, TARS_VAULT=str(other)))
    assert status(checks, "daemon") == "warn" and f"it serves {vault}, but the config names {other}" in text(checks, "daemon")


def test_a_broken_config_file(tmp_path: Path, model_dir: Path):
    config = tmp_path / "broken.toml"
    config.write_text("[vault\npath = 1\n")
    code, checks, _ = doctor(isolated_env(tmp_path, TARS_CONFIG=str(config), TARS_MODEL_DIR=str(model_dir)))
    assert code == 1
    assert status(checks, "config") == "problem" and str(config) in text(checks, "config")
    assert status(checks, "vault") == "problem" and "config could not be read" in text(checks, "vault")


def test_an_enabled_whatsapp_channel_is_checked_down_to_the_graph_api(tmp_path: Path, vault: Path, model_dir: Path):
    """Issue 38: doctor checks each enabled channel's setup and says what to fix: the listener it
    needs, the settings (an allowed sender that is neither a number nor a BSUID, named by its
    place), the secret files and their modes, and the phone number id as the Graph API answers it
    (a GET of {graph_url}/{phone_number_id} with the token, against the fake Graph API)."""
    state = tmp_path / "state"
    state.mkdir()
    config = state / "config.toml"

    def configure(pnid: str = "123456789", senders: list[str] | None = None, http: bool = True, graph_url: str = "") -> None:
        senders = ["+353 87 123 4567", "US.13491208655302741918"] if senders is None else senders
        config.write_text(
            f"[http]\nenabled = {json.dumps(http)}\n\n[whatsapp]\nenabled = true\n"
            f"phone_number_id = {json.dumps(pnid)}\nallowed_senders = {json.dumps(senders)}\ngraph_url = {json.dumps(graph_url)}\n"
        )

    def secret(name: str, value: str, mode: int = 0o600) -> None:
        (state / name).write_text(value + "\n")
        (state / name).chmod(mode)

    env = isolated_env(tmp_path, TARS_CONFIG=str(config), TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir))
    with FakeGraph("123456789", "EAAGright") as graph:
        configure(senders=["+353 87 123 4567", "353-87-nope"], graph_url=graph.url)
        code, checks, _ = doctor(env)
        assert code == 1 and status(checks, "whatsapp") == "problem"
        found = text(checks, "whatsapp")
        for name in ("whatsapp_verify_token", "whatsapp_app_secret", "whatsapp_access_token"):
            assert f"{state / name} does not exist" in found
        assert "allowed_senders entry 2 is neither a phone number" in found and "nope" not in found
        assert not graph.requests  # no token: nothing to ask

        secret("whatsapp_verify_token", "verify")
        secret("whatsapp_app_secret", "app-secret", 0o644)
        secret("whatsapp_access_token", "EAAGwrong")
        configure(graph_url=graph.url)
        _, checks, _ = doctor(env)
        found = text(checks, "whatsapp")
        assert "can be read by others" in found and f"chmod 600 {state / 'whatsapp_app_secret'}" in found
        assert f"the Graph API refused the access token in {state / 'whatsapp_access_token'}" in found
        assert "Invalid OAuth access token" in found

        (state / "whatsapp_app_secret").chmod(0o600)
        secret("whatsapp_access_token", "EAAGright")
        configure(pnid="987654321", graph_url=graph.url)
        _, checks, _ = doctor(env)
        assert status(checks, "whatsapp") == "problem"
        assert "does not know phone number id 987654321" in text(checks, "whatsapp") and "WhatsApp › API Setup" in text(checks, "whatsapp")

        configure(graph_url=graph.url)
        _, checks, _ = doctor(env)
        assert [c["status"] for c in checks["whatsapp"]] == ["ok"], checks["whatsapp"]
        assert "the Graph API knows phone number id 123456789: 15550783881 (Test Number); 2 allowed senders" in text(checks, "whatsapp")
        asked = graph.requests[-1]
        assert asked.path == "/v21.0/123456789" and asked.headers["authorization"] == "Bearer EAAGright" and asked.status == 200

        configure(http=False, graph_url=graph.url)
        _, checks, _ = doctor(env)
        assert status(checks, "whatsapp") == "problem" and "set [http] enabled = true" in text(checks, "whatsapp")

    configure(graph_url=closed_port_url() + "/v21.0")
    _, checks, _ = doctor(env)
    assert status(checks, "whatsapp") == "problem" and "the Graph API cannot be reached" in text(checks, "whatsapp")


def test_an_enabled_telegram_channel_is_checked_down_to_the_bot_api(tmp_path: Path, vault: Path, model_dir: Path):
    """Issue 38: doctor checks the Telegram channel's setup: usernames in allowed_users, the token
    file and its mode, and the token as the Bot API answers getMe (against the fake Bot API); the
    token itself never appears in doctor's output."""
    from harness.fake_telegram import FakeTelegram

    state = tmp_path / "state"
    state.mkdir()
    config = state / "config.toml"
    token = state / "telegram_token"
    env = isolated_env(tmp_path, TARS_CONFIG=str(config), TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir))
    with FakeTelegram("123:right") as bot_api:
        config.write_text(f'[telegram]\nenabled = true\nallowed_users = [4242, "@sam"]\napi_url = {json.dumps(bot_api.url)}\n')
        code, checks, _ = doctor(env)
        assert code == 1 and status(checks, "telegram") == "problem"
        found = text(checks, "telegram")
        assert "usernames are not accepted" in found and f"{token} does not exist" in found

        token.write_text("123:wrong\n")
        token.chmod(0o644)
        config.write_text(f"[telegram]\nenabled = true\nallowed_users = [4242]\napi_url = {json.dumps(bot_api.url)}\n")
        _, checks, _ = doctor(env)
        found = text(checks, "telegram")
        assert "can be read by others" in found

        token.chmod(0o600)
        bot_api.refused_text = "Unauthorized: the token {token} is revoked (GET {path})"  # an error text that quotes it (issue 43)
        _, checks, _ = doctor(env)
        found = text(checks, "telegram")
        assert f"the Bot API refused the token in {token}" in found and "@BotFather" in found and "123:wrong" not in json.dumps(checks)
        assert "the token <token> is revoked (GET /bot<token>/getMe)" in found

        token.write_text("123:right\n")
        _, checks, _ = doctor(env)
        assert [c["status"] for c in checks["telegram"]] == ["ok"], checks["telegram"]
        assert "the Bot API knows the token: the bot @tars_test_bot; 1 allowed user; long polling" in text(checks, "telegram")
        assert "123:right" not in json.dumps(checks)

    _, checks, _ = doctor(env)  # the Bot API is gone
    assert status(checks, "telegram") == "problem" and "cannot be reached" in text(checks, "telegram")
