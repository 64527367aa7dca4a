"""tarsctl config path | show: the file in use, and each value with where it came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.user_env import isolated_env
from tarsd.config.sources import config_sources


def tarsctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tarsctl.cli", *args], env=env, capture_output=True, text=True, timeout=60)


def test_path_is_tars_config_or_the_platform_default(tmp_path: Path):
    env = isolated_env(tmp_path)
    assert tarsctl(env, "config", "path").stdout.strip() == env["TARS_CONFIG"]
    del env["TARS_CONFIG"]
    done = tarsctl(env, "config", "path")
    assert done.stdout.strip() == str(Path(env["XDG_CONFIG_HOME"]) / "tars" / "config.toml")
    assert "no file there yet" in done.stderr


def test_show_names_default_file_and_environment(tmp_path: Path):
    config = tmp_path / "my config.toml"
    config.write_text('[vault]\npath = "~/from-file"\n\n[chat]\nollama_model = "qwen3"\nmax_tool_rounds = 3\n', encoding="utf-8")
    env = isolated_env(
        tmp_path, TARS_CONFIG=str(config), TARS_VAULT="/from/env", TARS_EMBEDDER_MODEL_DIR="/models", TARS_CHAT_KEEP_RECENT="4"
    )
    done = tarsctl(env, "config", "show", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["file"] == str(config) and shown["file_exists"] is True
    sources = {(s["section"], s["key"]): (s["value"], s["source"]) for s in shown["settings"]}
    assert sources[("vault", "path")] == ("/from/env", "env TARS_VAULT")  # the alias wins over the file
    assert sources[("chat", "ollama_model")] == ("qwen3", "file")
    assert sources[("chat", "max_tool_rounds")] == (3, "file")
    assert sources[("chat", "keep_recent")] == (4, "env TARS_CHAT_KEEP_RECENT")  # typed, not the string
    assert sources[("embedder", "model_dir")] == ("/models", "env TARS_EMBEDDER_MODEL_DIR")
    assert sources[("embedder", "kind")] == ("local", "default")
    assert shown["derived"]["vault"] == "/from/env" and shown["derived"]["socket"] == env["TARS_SOCKET"]

    lines = tarsctl(env, "config", "show").stdout.splitlines()
    assert lines[0] == f"# config file: {config}"
    assert any(line.startswith("ollama_model") and '= "qwen3"' in line and line.endswith("# file") for line in lines)
    assert any(line.startswith("path") and line.endswith("# env TARS_VAULT") for line in lines)


def test_command_line_overrides_are_named():
    sources = config_sources(path=None, env={"TARS_CONFIG": "/dev/null"}, vault_path="/cli")
    vault = next(s for s in sources.settings if (s.section, s.key) == ("vault", "path"))
    assert (vault.value, vault.source) == ("/cli", "command line")


def test_a_broken_file_is_reported_not_a_traceback(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text("[chat]\nmax_tool_rounds = 'many'\n")
    done = tarsctl(isolated_env(tmp_path, TARS_CONFIG=str(config)), "config", "show")
    assert done.returncode == 1
    assert done.stderr.startswith("tarsctl: invalid configuration") and "max_tool_rounds" in done.stderr


def test_the_completion_scripts_know_every_command_and_option():
    """The scripts are written by hand: this catches a command or option added without them."""
    import argparse
    import re

    from tarsctl.arguments import full_parser
    from tarsctl.completion import BASH_COMPLETION, ZSH_COMPLETION

    def case(script: str, name: str) -> str:
        found = re.search(rf"^\s+{name}\) (.*?);;", script, re.MULTILINE | re.DOTALL)
        return found.group(1) if found else ""

    [commands] = [a for a in full_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    listed = re.search(r'local commands="([^"]*)"', BASH_COMPLETION).group(1).split()
    missing = []
    for name, sub in commands.choices.items():
        if name not in listed or f"{name}:'" not in ZSH_COMPLETION:
            missing.append(name)
        options = [o for a in sub._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
        bash_options = case(BASH_COMPLETION.split('elif [[ "$cur" == -* ]]')[1], name)
        for option in options:
            if not re.search(rf"(?<![\w-]){option}(?![\w-])", bash_options) or not re.search(
                rf"(?<![\w-]){option}(?![\w-])", case(ZSH_COMPLETION, name)
            ):
                missing.append(f"{name} {option}")
    assert not missing, missing


def test_a_shell_with_no_vault_shows_the_running_tarsds(tmp_path: Path, vault: Path, start_daemon):
    """The demo's second shell: no TARS_VAULT, no file; the tarsd on the socket serves a vault."""
    daemon = start_daemon()
    shell = tmp_path / "shell"
    shell.mkdir()
    env = isolated_env(shell, TARS_SOCKET=str(daemon.socket))
    done = tarsctl(env, "config", "show", "--json")
    assert done.returncode == 0, done.stderr
    derived = json.loads(done.stdout)["derived"]
    assert derived["vault"] == str(vault) and derived["database"] == daemon.env["TARS_DB"]
    assert derived["vault_from"] == "the running tarsd (this config names no vault)"
    assert derived["tarsd"] == f"answers: serves {vault}; embedder sentence-transformers/all-MiniLM-L6-v2 (none, disabled)"
    lines = tarsctl(env, "config", "show").stdout.splitlines()
    assert f"# vault      {vault}" in lines and not any("no vault configured" in line for line in lines)

    daemon.stop()
    derived = json.loads(tarsctl(env, "config", "show", "--json").stdout)["derived"]
    assert derived["vault"].startswith("(unknown: no vault configured") and derived["tarsd"] == f"does not answer on {daemon.socket}"


def test_the_default_anthropic_key_file_follows_xdg_config_home(tmp_path: Path, start_daemon):
    """XDG_CONFIG_HOME moves the config file, and the key file beside it: a real tarsd finds the key there."""
    from harness.fake_llm import FakeAnthropic

    xdg = tmp_path / "xdg"
    key_file = xdg / "tars" / "anthropic_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text("sk-from-xdg\n", encoding="utf-8")
    key_file.chmod(0o600)
    env = isolated_env(tmp_path, XDG_CONFIG_HOME=str(xdg))  # HOME/.config is elsewhere
    shown = json.loads(tarsctl(env, "config", "show", "--json").stdout)
    assert {(s["key"], s["value"], s["source"]) for s in shown["settings"] if s["key"] == "anthropic_key_file"} == {
        ("anthropic_key_file", str(key_file), "default")
    }

    with FakeAnthropic(script=[{"text": "hello from the fake"}]) as anthropic:
        daemon = start_daemon(
            XDG_CONFIG_HOME=str(xdg),
            HOME=env["HOME"],
            ANTHROPIC_API_KEY="",  # the key file only
            TARS_CHAT_PROVIDER="anthropic",
            TARS_CHAT_ANTHROPIC_BASE_URL=anthropic.url,
            TARS_CHAT_ANTHROPIC_MODEL="claude-sonnet-4-5",
        )
        done = daemon.tarsctl("chat", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello from the fake\n"
