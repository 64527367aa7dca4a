"""The config is checked against its schema when tarsd starts: every key with a range or a set of
values refuses one outside it, naming the key as written in the file, the file (or the TARS_*
variable) and the values allowed. The keys are read from the settings' types, so a key added
later is covered without touching this file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import msgspec.inspect as types
import pytest

from tarsd.config.settings import Config, ConfigError, load_config
from tarsd.daemon.main import EXIT_CONFIG
from tarsd.daemon.main import main as tarsd_main

PROBE = "probe"  # the name of the [mcp.servers.NAME] entry the walk fills in


def leaves(info: types.StructType, table: tuple[str, ...] = ()):
    """(table, key, type) of every setting, the tables of tables ([mcp.servers.NAME]) included."""
    for field in info.fields:
        kind = field.type
        if isinstance(kind, types.StructType):
            yield from leaves(kind, (*table, field.name))
        elif isinstance(kind, types.DictType) and isinstance(kind.value_type, types.StructType):
            yield from leaves(kind.value_type, (*table, field.name, PROBE))
        else:
            yield table, field.name, kind


def without_none(kind: types.Type) -> types.Type:
    if isinstance(kind, types.UnionType):
        [kind] = [t for t in kind.types if not isinstance(t, types.NoneType)]
    return kind


def cases(kind: types.Type) -> tuple[list, list, list[str]]:
    """Values the type allows (each bound itself), values just outside it, and what the refusal
    must show of the allowed values."""
    kind = without_none(kind)
    if isinstance(kind, types.LiteralType):
        return list(kind.values), [f"not-{kind.values[0]}"], [json.dumps(v) for v in kind.values]
    if not isinstance(kind, (types.IntType, types.FloatType)):
        return [], [], []
    step = 1 if isinstance(kind, types.IntType) else 0.5
    good, bad, shown = [], [], []
    if kind.ge is not None:
        good, bad, shown = good + [kind.ge], bad + [kind.ge - step], shown + [f"{kind.ge:g}"]
    if kind.gt is not None:
        good, bad, shown = good + [kind.gt + step], bad + [kind.gt], shown + [f"{kind.gt:g}"]
    if kind.le is not None:
        good, bad, shown = good + [kind.le], bad + [kind.le + step], shown + [f"{kind.le:g}"]
    if kind.lt is not None:
        good, bad, shown = good + [kind.lt - step], bad + [kind.lt], shown + [f"{kind.lt:g}"]
    return good, bad, shown


SETTINGS = list(leaves(types.type_info(Config)))
BOUNDED = [(table, key, kind) for table, key, kind in SETTINGS if cases(kind)[1]]


def toml(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def config_text(table: tuple[str, ...], key: str, value: object) -> str:
    extra = 'command = ["true"]\n' if table[-1] == PROBE else ""  # a server needs a command or a url
    return f"[{'.'.join(table)}]\n{extra}{key} = {toml(value)}\n"


@pytest.fixture
def tarsd_env(tmp_path: Path, monkeypatch):
    """No TARS_* variable of the test run's own, an empty config file; tarsd's signal handlers
    (main() sets them first thing) are put back afterwards."""
    for name in list(os.environ):
        if name.startswith("TARS_"):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setenv("TARS_CONFIG", str(empty))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield tmp_path
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def start(tmp_path: Path, *args: str) -> int:
    # A vault that is not there: were the value let through, tarsd would stop at the vault, not start.
    return tarsd_main(["--vault", str(tmp_path / "no-vault"), *args])


def test_every_number_in_the_settings_has_a_range():
    """A new numeric key must say which values it takes (settings.py's Count, MoreThanZero, ...)."""
    unbounded = [
        f"[{'.'.join(table)}] {key}"
        for table, key, kind in SETTINGS
        if isinstance(without_none(kind), (types.IntType, types.FloatType)) and not cases(kind)[1]
    ]
    assert not unbounded, f"numbers without a range: {unbounded}"
    assert len(BOUNDED) > 40  # the walk reached the sections and [mcp.servers.NAME]
    assert ("daemon", "log_level") in {(t[0], k) for t, k, _ in BOUNDED if t}
    # And the defaults are within them.
    assert msgspec.convert(msgspec.to_builtins(Config()), Config) == Config()


@pytest.mark.parametrize(("table", "key", "kind"), BOUNDED, ids=[f"{'.'.join(t)}.{k}" for t, k, _ in BOUNDED])
def test_a_value_outside_the_range_stops_tarsd_at_start_naming_key_file_and_allowed(tarsd_env, capsys, table, key, kind):
    good, bad, shown = cases(kind)
    config = tarsd_env / "config.toml"
    for value in good:  # the edges are allowed
        config.write_text(config_text(table, key, value), encoding="utf-8")
        loaded = load_config(config, env={})
        section = getattr(loaded, table[0])
        entry = section.servers[PROBE] if table[-1] == PROBE else section
        assert getattr(entry, key) == value
    for value in bad:
        config.write_text(config_text(table, key, value), encoding="utf-8")
        assert start(tarsd_env, "--config", str(config)) == EXIT_CONFIG
        said = capsys.readouterr().err
        assert said.count("\n") == 1, said
        assert f"[{'.'.join(table)}] {key} = {toml(value)} in {config}" in said, said
        allowed = said.split(" it must be ", 1)[-1]
        assert all(text in allowed for text in shown), (said, shown)


ENV_BOUNDED = [(table, key, kind) for table, key, kind in BOUNDED if len(table) == 1]


@pytest.mark.parametrize(("table", "key", "kind"), ENV_BOUNDED, ids=[f"{t[0]}.{k}" for t, k, _ in ENV_BOUNDED])
def test_an_environment_variable_outside_the_range_is_refused_naming_it(tarsd_env, capsys, monkeypatch, table, key, kind):
    _, [value, *_], shown = cases(kind)
    name = f"TARS_{table[0]}_{key}".upper()
    monkeypatch.setenv(name, str(value))
    assert start(tarsd_env) == EXIT_CONFIG
    said = capsys.readouterr().err
    assert f"[{table[0]}] {key} = {value} from {name} is not allowed" in said, said
    assert all(text in said.split(" it must be ", 1)[-1] for text in shown), said


def test_the_command_line_is_named_too(tarsd_env, capsys):
    assert start(tarsd_env, "--log-level", "loud") == EXIT_CONFIG
    said = capsys.readouterr().err
    assert '[daemon] log_level = loud from the command line is not allowed: it must be one of "debug", "info", "warning", "error"' in said
    # The option takes any case, as it did; the file and TARS_DAEMON_LOG_LEVEL take the words as listed.
    assert start(tarsd_env, "--log-level", "DEBUG") == EXIT_CONFIG
    said = capsys.readouterr().err
    assert "does not exist" in said and "log_level" not in said, said


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[daemon]\ndebounce_ms = -5\n", "[daemon] debounce_ms = -5 in {file} is not allowed: it must be a whole number, 0 or more"),
        ('[daemon]\nlog_level = "loud"\n', '[daemon] log_level = "loud" in {file} is not allowed: it must be one of '),
        ("[daemon]\ndebounce = 5\n", "[daemon] has no key 'debounce' (in {file}); its keys are: socket, debounce_ms,"),
        ("[deamon]\ndebounce_ms = 5\n", "there is no section [deamon] (in {file}); the sections are: vault, index,"),
        ('[mcp.servers.todo]\ncommand = ["x"]\ntimeout_seconds = 0\n', "[mcp.servers.todo] timeout_seconds = 0 in {file}"),
    ],
)
def test_the_issue_examples_stop_a_real_tarsd(tmp_path: Path, vault: Path, text: str, said: str):
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TARS_")}
    done = subprocess.run(
        [sys.executable, "-m", "tarsd.daemon.main", "--vault", str(vault), "--config", str(config), "--socket", str(tmp_path / "s.sock")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == EXIT_CONFIG, done.stderr
    assert done.stderr.startswith("tarsd: invalid configuration: " + said.format(file=config)), done.stderr
    assert not (tmp_path / "s.sock").exists()


def test_a_vault_that_is_not_there_is_named_with_what_to_do(tarsd_env, capsys):
    missing = tarsd_env / "Notes"
    assert tarsd_main(["--vault", str(missing)]) == EXIT_CONFIG
    said = capsys.readouterr().err
    assert f"the vault {missing} does not exist" in said and f"mkdir -p {missing}" in said and "--vault" in said, said
    a_file = tarsd_env / "notes.md"
    a_file.write_text("# not a folder\n", encoding="utf-8")
    assert tarsd_main(["--vault", str(a_file)]) == EXIT_CONFIG
    said = capsys.readouterr().err
    assert f"the vault {a_file} is not a directory" in said and "does not exist" not in said, said


def test_an_environment_value_with_control_characters_is_shown_escaped():
    with pytest.raises(ConfigError) as refused:
        load_config(Path(os.devnull), env={"TARS_DAEMON_LOG_LEVEL": "\x1b[31mred"})
    assert '[daemon] log_level = "\\u001b[31mred" from TARS_DAEMON_LOG_LEVEL' in str(refused.value), refused.value


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('vault = "~/Notes"\n', 'vault = "~/Notes" in {file} is not allowed: it must be a table, [vault]'),
        ("[daemon]\ndebounce_ms = 1979-05-27\n", '[daemon] debounce_ms = "1979-05-27" in {file} is not allowed: it must be a whole number'),
        ("[index]\noverlap = 1.0\n", "[index] overlap = 1.0 in {file} is not allowed: it must be a number, 0 or more and less than 1"),
        ('[chat]\nprovider = "' + "x" * 500 + '"\n', '[chat] provider = "' + "x" * 200 + '"... in {file}'),
    ],
)
def test_odd_values_are_shown_as_written_and_cut_when_long(tmp_path: Path, text: str, said: str):
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(config, env={})
    assert str(refused.value).startswith("invalid configuration: " + said.format(file=config)), refused.value
