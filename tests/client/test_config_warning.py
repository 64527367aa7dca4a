"""tarsctl says once, on stderr, that the config file it reads is broken, and still does what it
can: a running tarsd answers searches and status whatever the file now says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.vault_files import write
from tarsd.config.settings import config_file_path


@pytest.fixture
def daemon(start_daemon, vault: Path):
    write(vault, "Sourdough.md", "# Sourdough\n\nBake the bread at 250 °C.\n")
    daemon = start_daemon()
    assert daemon.tarsctl("index").returncode == 0
    return daemon


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tarsctl: warning:")]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[daemon\nlog_level = "info"\n', "cannot read config file {file}: "),  # not TOML
        ('[daemon]\nlog_level = "loud"\n', '[daemon] log_level = "loud" in {file} is not allowed'),  # TOML, a bad value
    ],
)
def test_search_and_status_warn_once_about_a_broken_config_and_still_answer(daemon, text, named):
    config = Path(daemon.env["TARS_CONFIG"])
    config.write_text(text, encoding="utf-8")
    named = named.format(file=config)

    status = daemon.tarsctl("status")
    assert status.returncode == 0, status.stderr
    [warning] = warnings(status.stderr)
    assert named in warning and "tarsd will not start with this config" in warning
    assert len(status.stderr.splitlines()) == 1, status.stderr  # the warning, and nothing more

    for argv in (("search", "--mode", "fts", "bread"), ("search", "--json", "--mode", "fts", "bread"), ("ping",)):
        done = daemon.tarsctl(*argv)
        assert done.returncode == 0, done.stderr
        assert argv[0] == "ping" or "Sourdough.md" in done.stdout
        found = warnings(done.stderr)
        assert len(found) == 1 and named in found[0], done.stderr

    # The full client, which the quick path hands what it cannot answer: once too.
    handed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tarsctl.cli import main; sys.exit(main(sys.argv[1:]))",
            "search",
            "--mode",
            "fts",
            "bread",
        ],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert handed.returncode == 0 and len(warnings(handed.stderr)) == 1 and named in handed.stderr, handed.stderr

    # Fixed, or gone (TARS_CONFIG names a file no longer there: nothing broken to read): not a word.
    config.write_text('[daemon]\nlog_level = "debug"\n', encoding="utf-8")
    for argv in (("status",), ("search", "bread"), ("ping",)):
        done = daemon.tarsctl(*argv)
        assert done.returncode == 0 and not warnings(done.stderr), done.stderr
    config.unlink()
    done = daemon.tarsctl("status")
    assert done.returncode == 0 and not warnings(done.stderr), done.stderr


def imports(daemon, *argv: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tarsctl", *argv], env=daemon.env, capture_output=True, text=True, timeout=60
    )
    return done, {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_the_quick_path_checks_the_file_only_when_it_changed_after_tarsd_started(daemon):
    """A file tarsd started with is known good: two stats, no parsing, no msgspec on the quick path."""
    config = Path(daemon.env["TARS_CONFIG"])
    config.write_text('[daemon]\nlog_level = "info"\n\n[chat]\nprovider = "ollama"\n', encoding="utf-8")
    started = daemon.socket.stat().st_mtime
    os.utime(config, (started - 60, started - 60))  # as if written before tarsd started
    done, modules = imports(daemon, "search", "--mode", "fts", "bread")
    assert done.returncode == 0 and not warnings(done.stderr), done.stderr
    assert not {m for m in modules if m.split(".")[0] in ("msgspec", "tomllib", "platformdirs", "shutil", "tarsd")}, modules
    done, modules = imports(daemon, "status")  # the full client spares the settings' load too
    assert done.returncode == 0 and not warnings(done.stderr) and "tarsd.config.settings" not in modules, done.stderr[-2000:]

    config.write_text('[daemon]\nlog_level = "loud"\n', encoding="utf-8")  # changed since: checked as tarsd would
    done, modules = imports(daemon, "search", "--mode", "fts", "bread")
    assert done.returncode == 0 and "Sourdough.md" in done.stdout
    [warning] = warnings(done.stderr)
    assert f'[daemon] log_level = "loud" in {config} is not allowed' in warning


@pytest.mark.parametrize(
    "env",
    [
        {"TARS_CONFIG": "~/my tars.toml"},
        {"XDG_CONFIG_HOME": "/elsewhere/config"},
        {"XDG_CONFIG_HOME": "  "},
        {},
    ],
)
def test_the_quick_path_finds_the_file_tarsd_reads(monkeypatch, tmp_path: Path, env):
    from tarsctl.config_warning import config_file_address

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("TARS_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert config_file_address() == str(config_file_path())
