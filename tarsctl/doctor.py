"""`tarsctl doctor`: one screen that checks a tars setup and says how to fix what is wrong.

Each check gives ok, warn (works, but worth knowing) or problem (blocks search, memory or MCP,
an enabled HTTP listener or messenger channel, or a routine of the routines file: exit code 1),
with the fix. A chat provider that cannot be used is a warning: the rest works without one (but
routines, which run it, are warned of). It reads the same config as tarsd (file + TARS_*
variables), so run it in the shell where you run tarsctl; when that config names no vault (a
second shell beside `tarsd --vault X`), it judges the vault, database and model of the tarsd
that answers on the socket instead. Nothing here runs at tarsctl start-up: cli.py imports it for
doctor only.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tarsctl import __version__
from tarsctl.shown import shown_text
from tarsctl.socket_path import default_socket_path, socket_dir_problem
from tarsctl.transport import SUN_PATH_MAX

EXIT_OK, EXIT_PROBLEM = 0, 1
HTTP_TIMEOUT = 5.0
MODEL_FILES = ("model.onnx", "tokenizer.json", "tokenizer_config.json")


@dataclass
class Check:
    name: str
    status: str  # ok | warn | problem
    summary: str
    fix: str = ""


class Doctor:
    def __init__(self, socket: Path | None = None):
        self.socket_override = socket
        self.config = None  # tarsd.config.settings.Config once loaded
        self.vault_source = ""  # set when the vault comes from the service file or the running tarsd, not the config
        self.checks: list[Check] = []
        self._served = None  # the running tarsd's StatusReply, asked once
        self._daemon_error: Exception | None = None
        self._asked = False

    def add(self, name: str, status: str, summary: str, fix: str = "") -> None:
        self.checks.append(Check(name, status, summary, fix))

    def run(self) -> list[Check]:
        steps: list[tuple[str, Callable[[], None]]] = [
            ("python", self.python),
            ("sqlite", self.sqlite),
            ("config", self.load_config),
            ("vault", self.vault),
            ("database", self.database),
            ("model", self.model),
            ("socket", self.socket),
            ("daemon", self.daemon),
            ("http", self.http),
            ("channels", self.channels),
            ("sync", self.sync),
            ("service", self.service),
            ("chat", self.chat),
            ("routines", self.routines),
            ("tools", self.tools),
        ]
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
                self.add(name, "problem", f"the check itself failed: {type(exc).__name__}: {exc}", "report this as a tars bug")
        return self.checks

    # ---- the checks, in the order a setup depends on them ----

    def python(self) -> None:
        # pyproject's requires-python keeps older ones out; where it runs from is what helps.
        self.add("python", "ok", f"Python {platform.python_version()} ({sys.executable})")

    def sqlite(self) -> None:
        reinstall = "reinstall tars: uv tool install --reinstall PATH-OR-URL (or pipx reinstall tars)"
        try:
            import apsw
        except ImportError as exc:
            self.add("sqlite", "problem", f"apsw is not installed ({exc})", reinstall)
            return
        connection = apsw.Connection(":memory:")
        try:
            connection.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
        except apsw.Error as exc:
            self.add("sqlite", "problem", f"SQLite {apsw.sqlite_lib_version()} has no FTS5 ({exc})", reinstall)
            return
        from tarsd.store.database import StoreError, load_vec_extension

        try:
            vec = load_vec_extension(connection)
        except StoreError as exc:
            self.add("sqlite", "problem", str(exc), reinstall)
            return
        finally:
            connection.close()
        self.add("sqlite", "ok", f"SQLite {apsw.sqlite_lib_version()} with FTS5; sqlite-vec {vec} loads through apsw {apsw.apsw_version()}")

    def load_config(self) -> None:
        from tarsd.config.settings import ConfigError, config_file_path
        from tarsd.config.sources import config_sources

        try:
            sources = config_sources()
        except ConfigError as exc:
            self.add("config", "problem", str(exc), f"fix {config_file_path()} or the TARS_* variable it names")
            return
        self.config = sources.config
        if not self.config.vault.path:
            self._vault_from_service()
        if not self.config.vault.path:
            self._vault_from_daemon()
        from_env = sorted({s.source.removeprefix("env ") for s in sources.settings if s.source.startswith("env ")})
        where = f"{sources.file}" if sources.file_exists else f"no file at {sources.file}: defaults"
        if self.vault_source:
            where += f"; no vault in it: the vault of {self.vault_source}"
        self.add("config", "ok", where + (f", plus {', '.join(from_env)}" if from_env else "") + " (see: tarsctl config show)")

    def _vault_from_service(self) -> None:
        """`tarsctl service install --vault X` puts the vault in the service file only: check that one."""
        from tarsctl.service import ServiceError, installed_vault
        from tarsd.config.settings import load_config

        try:
            vault = installed_vault()
        except ServiceError:
            return
        if vault is not None:
            self.config = load_config(vault_path=vault)
            self.vault_source = "the service file"

    def _vault_from_daemon(self) -> None:
        """A shell with no vault of its own beside a running `tarsd --vault X` (the demo's second
        shell): what matters is what that tarsd serves, so judge its vault and database."""
        from tarsd.config.settings import load_config

        served = self.served()
        if served is not None and served.vault:
            self.config = load_config(vault_path=served.vault, index_db_path=served.database or None)
            self.vault_source = "the running tarsd"

    def vault(self) -> None:
        from tarsd.config.settings import ConfigError

        if self.config is None:
            self.add("vault", "problem", "unknown: the config could not be read", "fix the config first")
            return
        try:
            vault = self.config.vault_path
        except ConfigError:
            self.add(
                "vault",
                "problem",
                "no vault configured",
                "set TARS_VAULT=PATH, or [vault] path in the config file, or install the service with tarsctl service install --vault PATH",
            )
            return
        if not vault.exists():
            fix = "create it, or point TARS_VAULT / [vault] path at your vault"
            if self.vault_source == "the running tarsd":
                fix = "put the folder back (tarsd serves it again), or restart tarsd with --vault PATH"
            self.add("vault", "problem", f"{vault} does not exist", fix)
            return
        if not vault.is_dir():
            self.add("vault", "problem", f"{vault} is not a folder", "point TARS_VAULT / [vault] path at the vault folder")
            return
        try:
            notes = _count_notes(vault)
        except OSError as exc:
            self.add("vault", "problem", f"cannot read {vault} ({exc.strerror})", f"give yourself read access: chmod u+rx {vault}")
            return
        problem = _write_problem(vault)
        memory = vault / self.config.memory.semantic_file
        if problem is None and memory.exists() and not os.access(memory, os.W_OK):
            problem = f"{memory.name} is read-only"
        if problem is not None:
            self.add(
                "vault",
                "problem",
                f"{vault} is not writable: {problem}; tars writes memory and session logs there",
                f"make it writable: chmod -R u+w {_quote(vault)} (and check the mount is read-write, `lsattr -d` for the immutable flag)",
            )
            return
        summary = f"{vault}: {notes} note{'s' * (notes != 1)}, readable and writable"
        if self.vault_source:
            summary += f" (named by {self.vault_source})"
        if sys.platform == "darwin":
            from tarsctl.service import find_tarsd, full_disk_access_hint

            tarsd = find_tarsd()
            hint = full_disk_access_hint(vault, tarsd) if tarsd else None
            if hint:
                self.add("vault", "warn", summary, hint)
                return
        self.add("vault", "ok", summary)

    def database(self) -> None:
        from tarsd.config.settings import ConfigError

        if self.config is None:
            return
        try:
            database, vault = self.config.db_path, self.config.vault_path
        except ConfigError:
            return  # no vault: said above
        if database.is_relative_to(vault):
            self.add("database", "problem", f"{database} is inside the vault", "set TARS_DB (or [index] db_path) outside the vault")
            return
        folder = _nearest_existing(database.parent)
        problem = _write_problem(folder) if folder is not None else "no folder above it exists"
        if problem is not None:
            fix = "set TARS_DB (or [index] db_path) to a writable place"
            self.add("database", "problem", f"cannot write {database.parent}: {problem}", fix)
            return
        # With its write-ahead log, as status counts it: a fresh index lives mostly in the WAL until a checkpoint.
        parts = [path for path in (database, Path(f"{database}-wal")) if path.exists()]
        size = f"{sum(path.stat().st_size for path in parts) / 1e6:.1f} MB" if database.exists() else "not created yet"
        self.add("database", "ok", f"{database} ({size})")

    def model(self) -> None:
        if self.config is None:
            return
        served = self.served()
        if served is not None and served.embedder.kind:
            self._served_model(served.embedder)
            return
        embedder = self.config.embedder
        if embedder.kind == "none":
            self.add("model", "warn", "no embedder ([embedder] kind = none): keyword search only", 'set [embedder] kind = "local"')
            return
        if embedder.kind == "ollama":
            self._ollama_model("model", embedder.ollama_host, embedder.model, "embedding model", "[embedder] ollama_host")
            return
        from tarsd.config.budget import plan_for

        keyword_only = plan_for(self.config).keyword_only
        if keyword_only:  # judged from this shell's memory; a service's own limit may differ (tarsctl status, once it runs)
            self.add("model", "warn", f"tarsd will not load the model: {keyword_only}")
            return
        if embedder.model_dir:
            folder = Path(embedder.model_dir).expanduser()
            missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
            if missing:
                self.add(
                    "model",
                    "problem",
                    f"no embedding model at {folder} (missing {', '.join(missing)})",
                    "point TARS_MODEL_DIR ([embedder] model_dir) at a folder holding the ONNX model, or unset it to download it once",
                )
            else:
                self.add("model", "ok", f"{embedder.model} at {folder}")
            return
        import platformdirs

        cache = Path(platformdirs.user_cache_dir("tars")) / "models"
        found = next(cache.rglob("model.onnx"), None) if cache.is_dir() else None
        if found is not None:
            self.add("model", "ok", f"{embedder.model}, downloaded in {found.parent}")
            return
        endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        offline_fix = "connect to the internet once (tarsd downloads it at start), or set TARS_MODEL_DIR ([embedder] model_dir) to a copy"
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            self.add("model", "problem", f"{embedder.model} is not downloaded and HF_HUB_OFFLINE forbids the download", offline_fix)
            return
        status, _, error = _http_get(endpoint)
        if status is None:
            self.add(
                "model",
                "problem",
                f"{embedder.model} is not downloaded yet (it would go to {cache}) and {endpoint} cannot be reached ({error})",
                offline_fix,
            )
        else:
            self.add("model", "ok", f"{embedder.model} is not downloaded yet: tarsd fetches it (about 90 MB) into {cache} on first start")

    def _served_model(self, embedder) -> None:
        """The running tarsd's embedder: the one searches use, whatever this shell's config says."""
        what = f"{embedder.model} ({embedder.kind}), in the running tarsd"
        if embedder.state == "ready":
            self.add("model", "ok", f"{what}: ready, {embedder.dims} dimensions")
        elif embedder.state == "disabled" and embedder.kind == "local":  # no room in tarsd's memory budget
            self.add("model", "warn", f"the running tarsd does not load the model: {embedder.reason}")
        elif embedder.state == "disabled":
            self.add(
                "model",
                "warn",
                f"no embedder in the running tarsd ({embedder.reason}): keyword search only",
                'set [embedder] kind = "local"',
            )
        elif embedder.state == "loading":
            self.add("model", "warn", f"{what}: {embedder.reason}", "keyword search works meanwhile; see tarsctl status")
        else:
            self.add("model", "problem", f"{what}: {embedder.reason}", "fix that, then tarsctl index retries at once")

    def socket(self) -> None:
        path = self.socket_path()
        size = len(os.fsencode(path))
        if size >= SUN_PATH_MAX:
            self.add(
                "socket",
                "problem",
                f"{path} is {size} bytes, over the {SUN_PATH_MAX - 1}-byte limit of a socket address",
                "set TARS_SOCKET (and [daemon] socket) to a shorter path",
            )
            return
        problem = socket_dir_problem(path)
        if problem is not None:
            what, _, fix = problem.rpartition(": ")  # the rule's messages end with what to do
            self.add("socket", "problem", what, fix)
            return
        if self.socket_override is None and self.config is not None and self.config.socket_path != default_socket_path():
            self.add(
                "socket",
                "warn",
                f"the config puts tarsd's socket at {self.config.socket_path}, but tarsctl looks at {default_socket_path()}",
                f"tarsctl does not read the config file: export TARS_SOCKET={self.config.socket_path}",
            )
            return
        self.add("socket", "ok", f"{path} ({'its folder is private' if path.parent.exists() else 'tarsd creates its folder, private'})")

    def served(self):
        """The running tarsd's status reply (asked once), or None when it does not answer; the
        daemon check says why."""
        from tarsctl.client import Client, DaemonNotRunning, ProtocolError, RemoteError
        from tarsctl.protocol import Status

        if not self._asked:
            self._asked = True
            try:
                with Client(self.socket_path(), timeout=HTTP_TIMEOUT) as client:
                    self._served = client.call(Status(id=client.next_id()))
            except (DaemonNotRunning, ProtocolError, RemoteError, TimeoutError, OSError) as exc:
                self._daemon_error = exc
        return self._served

    def daemon(self) -> None:
        from tarsctl.client import DaemonNotRunning, PermissionDenied

        path = self.socket_path()
        reply = self.served()
        if isinstance(self._daemon_error, PermissionDenied):  # its message says whose it is and what to do
            self.add("daemon", "problem", str(self._daemon_error))
            return
        if isinstance(self._daemon_error, DaemonNotRunning):
            fix = "start it: tarsctl service install (always on), or tarsd --vault PATH (in a terminal)"
            self.add("daemon", "problem", f"tarsd does not answer on {path}", fix)
            return
        if reply is None:
            self.add(
                "daemon",
                "problem",
                f"tarsd on {path} answered badly: {self._daemon_error}",
                "restart it (tarsctl stop, then start it again)",
            )
            return
        counts = reply.counts
        summary = f"answers: {reply.vault}, {counts.get('files', 0)} notes, {counts.get('chunks', 0)} chunks, up {reply.uptime:.0f} s"
        configured = self._configured_vault()
        if not Path(reply.vault).is_dir():
            fix = "put the folder back (tarsd serves it again), or restart tarsd with --vault PATH"
            self.add("daemon", "problem", f"{summary}; but {reply.vault} is no longer there", fix)
        elif configured is not None and Path(reply.vault) != configured:
            fix = f"it serves {reply.vault}, but the config names {configured}: restart it with the right vault"
            self.add("daemon", "warn", summary, fix)
        elif reply.warnings:
            self.add("daemon", "warn", summary + "; " + "; ".join(reply.warnings), "see tarsctl status")
        else:
            self.add("daemon", "ok", summary)

    def http(self) -> None:
        """Only when [http] enabled: the token file, and whether tarsd listens."""
        if self.config is None or not self.config.http.enabled:
            return
        from tarsctl.client import Client
        from tarsctl.protocol import Status
        from tarsd.config.settings import config_file_path
        from tarsd.setup.http_tokens import TokenError, read_token, token_path

        path = token_path(self.config.http.token_file, config_file_path())
        try:
            read_token(path)
        except FileNotFoundError:
            self.add("http", "warn", f"no token file at {path} yet", "tarsd makes it when it starts; or: tarsctl http token")
        except (OSError, TokenError) as exc:
            self.add("http", "problem", f"the token file cannot be used: {exc}", "tarsctl http token --rotate writes a new one")
            return
        try:
            with Client(self.socket_path(), timeout=HTTP_TIMEOUT) as client:
                listener = client.call(Status(id=client.next_id())).http
        except Exception:  # noqa: BLE001 - the daemon check already said why
            return
        if not listener.url:
            self.add("http", "problem", f"enabled but not listening: {listener.error}", "fix that, then restart tarsd")
        elif listener.lan:
            self.add(
                "http",
                "warn",
                f"listening on {listener.url} and beyond this machine, over plain HTTP",
                "put it behind a reverse proxy with TLS, or Tailscale (README: tars in a browser)",
            )
        else:
            self.add("http", "ok", f"listening on {listener.url}; `tarsctl http url` opens the page")

    def channels(self) -> None:
        """Each enabled messenger channel ([whatsapp], ...), a check line or more under its own
        name: its settings, secret files and the messenger's answer (tarsctl/channel_doctor.py)."""
        if self.config is None:
            return
        from tarsctl.channel_doctor import check_channels
        from tarsd.config.settings import config_file_path

        for name, status, summary, fix in check_channels(self.config, config_file_path(), _http_get):
            self.add(name, status, summary, fix)

    def sync(self) -> None:
        """A vault synced with other machines (tarsctl/sync_doctor.py): the sync tools seen, conflict
        copies, the other tarsd writing it. Nothing for a vault no sync tool marks and no other tarsd writes."""
        if self._configured_vault() is None:
            return  # no config or no vault: said by their checks
        from tarsctl.sync_doctor import check_sync

        for status, summary, fix in check_sync(self.config, self.served()):
            self.add("sync", status, summary, fix)

    def service(self) -> None:
        from tarsctl.service import ServiceError, inspect, linger_enabled, linger_hint

        try:
            state = inspect()
        except ServiceError as exc:
            self.add("service", "warn", str(exc))
            return
        if not state.installed:
            self.add("service", "warn", f"not installed (no {state.file})", "to run tarsd always: tarsctl service install --vault PATH")
            return
        if state.tarsd is None or not state.tarsd.is_file():
            self.add(
                "service",
                "problem",
                f"{state.file} runs {state.tarsd or 'nothing'}, which does not exist",
                "reinstall tars, then run tarsctl service install again",
            )
            return
        configured = self._configured_vault()
        if configured is not None and state.vault is not None and state.vault != configured:
            fix = "tarsctl service install --vault PATH"
            self.add("service", "warn", f"{state.file} serves {state.vault}, the config names {configured}", fix)
        elif not state.enabled:
            unknown = f" (systemd --user cannot be asked: {state.manager_error})" if state.manager_error else ""
            self.add(
                "service",
                "warn",
                f"{state.file} is installed but not enabled{unknown}",
                "tarsctl service install (or systemctl --user enable --now tarsd)",
            )
        elif state.manager_error:
            self.add("service", "warn", f"{state.file} is enabled; systemd --user cannot be asked whether it runs: {state.manager_error}")
        elif state.active not in ("active", "running"):
            self.add("service", "warn", f"{state.file} is enabled but {state.active}", "tarsctl service logs, then tarsctl service install")
        else:
            self.add("service", "ok", f"{state.file}: enabled, {state.active}")
        if state.manager == "systemd" and not linger_enabled():
            self.add("service", "warn", *linger_hint())

    def chat(self) -> None:
        if self.config is None:
            return
        chat = self.config.chat
        if chat.provider == "ollama":
            self._ollama_model("chat", chat.ollama_host, chat.ollama_model, "chat model", "[chat] ollama_host")
        else:
            self._anthropic(chat)
        # Search, memory and MCP work without a chat provider: what stops chat only is a warning.
        for check in self.checks:
            if check.name == "chat" and check.status == "problem":
                check.status = "warn"
                check.summary += " (chat only: search, memory and MCP work without it)"

    def routines(self) -> None:
        """The routines file, read as tarsd reads it: each entry that cannot run is named (a problem:
        it never runs); the routines the running tarsd's clock set aside (their times cannot be
        computed); and, when routines exist, whether the chat model they run answers (the chat
        check's verdict: without it every run fails)."""
        if self.config is None:
            return
        from tarsd.config.settings import config_file_path
        from tarsd.routines.book import Book, routines_path
        from tarsd.routines.schedule import ScheduleError, user_timezone

        settings = self.config.routines
        try:
            tz = user_timezone(settings.timezone)
        except ScheduleError as exc:
            self.add("routines", "problem", f"[routines] timezone: {exc}", exc.hint)
            return
        book = Book(routines_path(settings.file, config_file_path()), tz)
        try:
            found = book.load()
        except Exception as exc:  # noqa: BLE001 - tarsd keeps what it read before; here nothing was: say so
            self.add("routines", "problem", f"{book.path} cannot be read: {type(exc).__name__}: {exc}", "fix or restore the file")
            return
        fix = f"fix or remove those entries in {book.path} (`tarsctl routines` shows the same)"
        if book.problem:
            self.add("routines", "problem", book.problem, fix)
        served = self.served()
        for line in served.routines.set_aside if served is not None else []:
            self.add("routines", "problem", line, fix)
        prompts = [r for r in found if not r.is_reminder and not r.paused]
        reminders = sum(1 for r in found if r.is_reminder)
        summary = f"{len(found) - reminders} routines, {reminders} reminders in {book.path}"
        if not settings.enabled:
            self.add("routines", "ok", f"{summary}; [routines] enabled = false: none runs on this machine")
            return
        chat = next((c for c in self.checks if c.name == "chat" and c.status != "ok"), None)
        if prompts and chat is not None:
            why = chat.summary.split(" (chat only:")[0]
            self.add(
                "routines",
                "warn",
                f"{summary}; {len(prompts)} of them run the chat model, and {why}: each run fails until it answers",
                "fix the chat check above; meanwhile a failed run leaves a notice in the inbox and on the routine's messenger",
            )
        elif not book.problem:
            self.add("routines", "ok", summary)

    def tools(self) -> None:
        """Each MCP server of [mcp.servers], started here on its own and its tools listed
        (tarsctl/tools_view.py); a server that fails is a warning: only the chat's tools need it."""
        if self.config is None or not self.config.mcp.servers:
            return
        from tarsctl.tools_view import probe_servers

        for status, summary, fix in probe_servers(self.config.mcp):
            self.add("tools", status, summary, fix)

    # ---- helpers ----

    def socket_path(self) -> Path:
        if self.socket_override is not None:
            return self.socket_override
        return self.config.socket_path if self.config is not None else default_socket_path()

    def _configured_vault(self) -> Path | None:
        try:
            return self.config.vault_path if self.config is not None else None
        except Exception:  # noqa: BLE001 - no vault configured: said by the vault check
            return None

    def _ollama_model(self, name: str, host: str, model: str, what: str, setting: str) -> None:
        status, body, error = _http_get(host.rstrip("/") + "/api/tags")
        if status is None:
            self.add(name, "problem", f"Ollama is not reachable at {host} ({error})", f"start it (ollama serve), or set {setting}")
            return
        if status != 200:
            self.add(name, "problem", f"Ollama at {host} answered HTTP {status}", f"check {setting} points at Ollama")
            return
        try:
            names = {m.get("name", "") for m in json.loads(body).get("models", [])}
        except (ValueError, AttributeError):
            self.add(name, "problem", f"{host} answered, but not like Ollama", f"check {setting}")
            return
        if model in names or f"{model}:latest" in names:
            self.add(name, "ok", f"Ollama at {host} has the {what} {model}")
        else:
            self.add(name, "problem", f"Ollama at {host} does not have the {what} {model}", f"ollama pull {model}")

    def _anthropic(self, chat) -> None:
        key_file = Path(chat.anthropic_key_file).expanduser()
        key, where = os.environ.get("ANTHROPIC_API_KEY", "").strip(), "ANTHROPIC_API_KEY"
        if not key:
            try:
                key = key_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0].strip()
                where = str(key_file)
            except (OSError, IndexError):
                key = ""
        if not key:
            fix = f"put it in {key_file} (first line, mode 600) or set ANTHROPIC_API_KEY for tarsd"
            self.add("chat", "problem", "no Anthropic API key", fix)
            return
        base = (chat.anthropic_base_url or "https://api.anthropic.com").rstrip("/")
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        status, _, error = _http_get(f"{base}/v1/models/{chat.anthropic_model}", headers)
        if status is None:
            self.add("chat", "problem", f"Anthropic is not reachable at {base} ({error})", "check the network or [chat] anthropic_base_url")
        elif status in (401, 403):
            self.add("chat", "problem", f"Anthropic rejected the API key from {where} (HTTP {status})", "check the key")
        elif status == 404:
            self.add("chat", "problem", f"Anthropic has no model {chat.anthropic_model}", "set [chat] anthropic_model to a current model")
        elif status != 200:
            self.add("chat", "warn", f"Anthropic at {base} answered HTTP {status} for the model {chat.anthropic_model}", "try again later")
        elif where == "ANTHROPIC_API_KEY":
            self.add(
                "chat",
                "warn",
                f"Anthropic {chat.anthropic_model} answers, with the key from this shell's ANTHROPIC_API_KEY",
                f"a service does not see this shell's variables: put the key in {key_file} (mode 600)",
            )
        else:
            self.add("chat", "ok", f"Anthropic {chat.anthropic_model} answers (key from {where})")


def _http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int | None, bytes, str]:
    """(HTTP status, body, "") or (None, b"", why it could not be reached)."""
    request = urllib.request.Request(url, headers=headers or {}, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            return response.status, response.read(1 << 20), ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(1 << 16), ""
    except urllib.error.URLError as exc:
        return None, b"", str(exc.reason)
    except (OSError, ValueError) as exc:  # timeouts, resets, a malformed URL
        return None, b"", str(exc) or type(exc).__name__


def _count_notes(vault: Path) -> int:
    """Markdown files outside dot-folders, like the indexer counts them; raises OSError if unreadable."""
    count = 0
    pending = [vault]
    os.listdir(vault)  # an unreadable vault raises here, not silently below
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            elif entry.name.lower().endswith(".md"):
                count += 1
    return count


def _write_problem(folder: Path) -> str | None:
    """Try to create and remove a file: permission bits, read-only mounts and ACLs all show up."""
    probe = folder / f".tars-doctor-{os.getpid()}.tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    probe.unlink(missing_ok=True)
    return None


def _nearest_existing(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return None


def _quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def main(args) -> int:
    checks = Doctor(Path(args.socket) if args.socket else None).run()
    problems = sum(c.status == "problem" for c in checks)
    warnings = sum(c.status == "warn" for c in checks)
    if args.json:
        print(json.dumps({"ok": problems == 0, "problems": problems, "warnings": warnings, "checks": [asdict(c) for c in checks]}))
        return EXIT_PROBLEM if problems else EXIT_OK
    print(f"tars doctor (tarsctl {__version__})")
    for check in checks:
        print(f"{check.status:<8} {check.name:<9} {shown_text(check.summary)}")  # names servers, notes, errors
        if check.fix and check.status != "ok":
            print(f"{'':<8} {'':<9} fix: {shown_text(check.fix)}")
    counted = f"{problems} problem{'s' * (problems != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    print(f"{counted}: tars cannot work normally until the problems are fixed" if problems else counted)
    return EXIT_PROBLEM if problems else EXIT_OK
