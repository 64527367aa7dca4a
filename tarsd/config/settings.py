"""One typed config object: defaults, then a TOML file, then TARS_* environment overrides.

Every setting has a documented default so tars runs with no config file at all.
Environment variables are named ``TARS_<SECTION>_<KEY>`` (``TARS_EMBEDDER_MODEL_DIR``);
a few common ones also have short aliases (``TARS_VAULT``, ``TARS_DB``, ``TARS_MODEL_DIR``).
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import platformdirs

APP_NAME = "tars"

# The ranges a number may take, checked when the config is read (the file and TARS_* alike), so a
# value that cannot work stops tarsd at start with the key named, not later in some worker.
# Every number in the settings has one (tests/daemon/test_config_schema.py walks the schema).
Count = Annotated[int, msgspec.Meta(ge=0)]  # a number of things, where 0 means none, off or "automatic"
AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
NotNegative = Annotated[float, msgspec.Meta(ge=0)]
MoreThanZero = Annotated[float, msgspec.Meta(gt=0)]  # times, rates and sizes: 0 would stall or spin
Score = Annotated[float, msgspec.Meta(ge=0, le=1)]  # search scores run from 0 to 1
Overlap = Annotated[float, msgspec.Meta(ge=0, lt=1)]  # a share of a chunk: all of it would never advance
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]  # 0: the system picks a free one

SHORT_ENV_ALIASES = {
    "TARS_VAULT": ("vault", "path"),
    "TARS_DB": ("index", "db_path"),
    "TARS_MODEL_DIR": ("embedder", "model_dir"),
    "TARS_EMBEDDER": ("embedder", "kind"),
    "TARS_OLLAMA_HOST": ("embedder", "ollama_host"),
    "TARS_SOCKET": ("daemon", "socket"),
}


class ConfigError(Exception):
    """The configuration cannot be used; the message says which setting and why."""


class MissingConfigFile(ConfigError):
    """The config file named by --config or TARS_CONFIG is not there."""


def default_anthropic_key_file() -> str:
    return str(Path(platformdirs.user_config_dir(APP_NAME)) / "anthropic_key")


class VaultConfig(msgspec.Struct, forbid_unknown_fields=True):
    path: str = ""
    # Memory type comes from the path: an exact file name or a folder prefix ending in "/".
    semantic: list[str] = msgspec.field(default_factory=lambda: ["Memory.md"])
    procedural: list[str] = msgspec.field(default_factory=lambda: ["Procedural.md", "procedural/"])
    episodic: list[str] = msgspec.field(default_factory=lambda: ["sessions/"])
    # Larger files are recorded as skipped instead of indexed.
    max_file_mb: MoreThanZero = 10.0


class IndexConfig(msgspec.Struct, forbid_unknown_fields=True):
    # Empty means the platform data directory, one database per vault.
    db_path: str = ""
    # Fraction of a chunk repeated at the start of the next one.
    overlap: Overlap = 0.10
    # Chunk size target in tokens; 0 means "as large as the embedder accepts".
    chunk_tokens: Count = 0


class EmbedderConfig(msgspec.Struct, forbid_unknown_fields=True):
    kind: Literal["local", "ollama", "none"] = "local"
    # local: a fastembed model name; ollama: an Ollama model tag.
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    # local: a directory holding model.onnx + tokenizer files (skips the download).
    model_dir: str = ""
    ollama_host: str = "http://127.0.0.1:11434"
    # Token limit for models whose tokenizer tars cannot read (Ollama).
    max_tokens: Count = 0
    # Texts per model call. Measured on a 2-core x86 box with the int8 MiniLM, batch 1 was fastest
    # (padding costs more than per-call overhead saves); bench/index_cost.py prints the figures.
    batch_size: AtLeastOne = 1
    threads: Count = 0  # the local ONNX model: passages embedded at once, one core each; 0: one per core tarsd may use
    # Under this memory budget ([daemon] memory_mb) the local model is not loaded: keyword search
    # only. tarsd with the model peaked at 420 MB embedding 10,000 notes (bench/daemon_memory.py). 0: always load it.
    min_memory_mb: Count = 512
    # After a failed load (no model, no network, Ollama down) the next attempt waits this long,
    # doubling each time up to retry_max_seconds. `tarsctl index` and SIGHUP retry at once.
    retry_seconds: MoreThanZero = 60.0
    retry_max_seconds: MoreThanZero = 3600.0


class DaemonConfig(msgspec.Struct, forbid_unknown_fields=True):
    # Empty means $XDG_RUNTIME_DIR/tars/tarsd.sock (Linux) or /tmp/tars-UID/tarsd.sock.
    socket: str = ""
    # Quiet time after the last change to a file before it is re-indexed.
    debounce_ms: Count = 200
    # Full reconcile scan against the real tree (watch events are only hints).
    reconcile_minutes: MoreThanZero = 10.0
    # Seconds between checks that the file watcher is still alive and the vault folder still
    # there (a stat and a look at a few threads; a watcher thread that dies is replaced at once).
    watcher_check_seconds: MoreThanZero = 1.0
    # A search first finishes the saves already queued (so an editor hook that saves, then
    # searches, sees its own save), waiting at most this long.
    settle_ms: Count = 1000
    # After a failed sync (disk full, database locked) the work is retried after this long,
    # doubling up to retry_max_seconds.
    retry_seconds: MoreThanZero = 2.0
    retry_max_seconds: MoreThanZero = 60.0
    # Connections: at most this many at once (fewer when file descriptors are short); a client
    # must say hello within hello_timeout_seconds, and one silent for idle_timeout_seconds is closed.
    max_connections: AtLeastOne = 256
    hello_timeout_seconds: MoreThanZero = 5.0
    idle_timeout_seconds: MoreThanZero = 600.0
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # The memory tarsd plans for, in MB; 0: the machine's, or its cgroup's limit when lower (a
    # service's MemoryMax=). Under 2048 it picks low-memory settings (tarsd/config/budget.py).
    memory_mb: Count = 0


class MemoryConfig(msgspec.Struct, forbid_unknown_fields=True):
    """Where the memory files live, relative to the vault."""

    semantic_file: str = "Memory.md"
    procedural_file: str = "Procedural.md"
    sessions_dir: str = "sessions"
    corrections_file: str = "corrections.md"
    rewards_file: str = "rewards.md"
    # Memory.md goes into every prompt whole up to this size (the design's guideline). Above
    # it, selective recall: the core section (and what precedes the first heading) plus the
    # recall_sections sections most relevant to the message; the rest is left to memory_search.
    prompt_lines: Count = 100
    prompt_tokens: Count = 1000
    core_section: str = "Core"
    recall_sections: Count = 3
    # Status warns when the part that is in every prompt (the whole file, or the core) passes these.
    warn_lines: Count = 100
    warn_tokens: Count = 1000
    # The memory review (docs/memory.md#the-memory-review): one review proposes removing at most this
    # share of Memory.md's lines (at least one), those still waiting from earlier reviews included, so
    # a wrong check can never empty the file even if its proposals are approved all at once.
    review_max_remove_percent: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    # Where the history of what the review changed is kept in the vault: a note per month.
    history_folder: str = "Memory history"


class ChatConfig(msgspec.Struct, forbid_unknown_fields=True):
    provider: Literal["ollama", "anthropic"] = "ollama"
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "llama3.2"
    anthropic_model: str = "claude-sonnet-4-5"
    anthropic_base_url: str = ""  # empty: the SDK's default
    # The API key comes from ANTHROPIC_API_KEY, else from this file (first line). By default
    # anthropic_key in the config folder, which follows XDG_CONFIG_HOME as the config file does.
    anthropic_key_file: str = msgspec.field(default_factory=default_anthropic_key_file)
    max_tokens: AtLeastOne = 2048
    max_tool_rounds: Count = 5
    request_timeout: MoreThanZero = 120.0
    # Retries for connection errors, 429 and 5xx (the SDK's own back-off).
    max_retries: Count = 2
    # Relevant context recalled for the opening message (tarsd/search/recall.py): lines of notes and
    # session logs within context_chars characters, from at most context_results notes (0: any number),
    # each at least context_min_score on the bands' scale.
    context_chars: Count = 4400
    context_results: Count = 0
    context_min_score: Score = 0.25
    # Compact a conversation when its messages pass this many characters, keeping the last few.
    compact_chars: AtLeastOne = 24_000
    keep_recent: Count = 6
    # Conversations idle this long get a session log from the scheduled snapshot.
    idle_minutes: NotNegative = 30.0
    snapshot_minutes: MoreThanZero = 5.0


class HttpConfig(msgspec.Struct, forbid_unknown_fields=True):
    """The optional HTTP API and web page (tarsd/serve/http.py). Off unless enabled: the daemon then
    never imports the web framework."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: Port = 8277  # T-A-R-S on a phone keypad
    # Listening on any address but loopback (a Pi serving a phone on the LAN) also needs lan = true:
    # plain HTTP carries the token and your notes in clear text (README: reverse proxy or Tailscale).
    lan: bool = False
    # Host names (and IP addresses) the listener answers to besides localhost, 127.0.0.1 and [::1]
    # with its port: the Pi's LAN name or address, a reverse proxy's or Tailscale's name. Any other
    # Host header is refused (DNS rebinding).
    hostnames: list[str] = msgspec.field(default_factory=list)
    # Origins a browser may call from besides those of the accepted hosts, e.g. "https://tars.example.org".
    origins: list[str] = msgspec.field(default_factory=list)
    # The bearer token's file; empty: http_token beside the config file. Made (mode 0600) on first start.
    token_file: str = ""
    # The MCP clients' token file; empty: mcp_token beside the config file. Made (mode 0600) on first
    # start. It reaches /mcp, and elsewhere only what an MCP client may do (docs/security.md).
    mcp_token_file: str = ""
    # Failed authentications per client address: a burst of this many, then one per second; past
    # that, 429 with Retry-After.
    auth_failures_burst: AtLeastOne = 5
    auth_failures_per_second: MoreThanZero = 1.0
    # Open connections: at most this many from one client (every loopback address is one client)
    # and in all (fewer when file descriptors are short). At a cap, the connection idle longest
    # (no request in progress) is closed to make room; when none is idle, the new one is.
    max_connections_per_client: AtLeastOne = 32
    max_connections: AtLeastOne = 128
    # A request's headers must arrive within header_timeout_seconds of its first byte (of the
    # connection, for the first request), its body within body_timeout_seconds after them;
    # otherwise the connection is closed.
    header_timeout_seconds: MoreThanZero = 10.0
    body_timeout_seconds: MoreThanZero = 30.0
    # MCP over streamable HTTP at /mcp (the tools of `tarsctl mcp`), behind the same token.
    mcp: bool = True


class McpServerConfig(msgspec.Struct, forbid_unknown_fields=True):
    """One MCP server whose tools the chat model may use ([mcp.servers.NAME], docs/tools.md).
    Exactly one of ``command`` (a subprocess on stdio) and ``url`` (streamable HTTP)."""

    command: list[str] = msgspec.field(default_factory=list)  # the program and its arguments, e.g. ["npx", "-y", "@doist/todoist-mcp"]
    env: dict[str, str] = msgspec.field(default_factory=dict)  # extra environment, no secrets (env_file holds those)
    env_file: str = ""  # KEY=VALUE lines added to the environment; mode 0600, else refused
    cwd: str = ""
    url: str = ""  # streamable HTTP, e.g. "http://127.0.0.1:8123/mcp"
    headers_file: str = ""  # "Name: value" lines sent with every request (a bearer token); mode 0600, else refused
    # Tool names as the server lists them (shell-style patterns allowed: "delete-*"). deny: never
    # offered to the model; allow: runs without asking; ask: the user confirms each call. A tool in
    # none of them is allowed when the server marks it read-only (readOnlyHint), else asked.
    allow: list[str] = msgspec.field(default_factory=list)
    ask: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)
    timeout_seconds: MoreThanZero | None = None  # a call's limit; None: [mcp] call_timeout_seconds
    enabled: bool = True


class McpConfig(msgspec.Struct, forbid_unknown_fields=True):
    """tarsd as an MCP client: the servers whose tools the chat model may call, and how they are kept."""

    servers: dict[str, McpServerConfig] = msgspec.field(default_factory=dict)
    call_timeout_seconds: MoreThanZero = 60.0  # a call that has not answered by then ends, and the model is told
    start_timeout_seconds: MoreThanZero = 30.0  # for a server to start and list its tools
    approval_timeout_seconds: MoreThanZero = 120.0  # a call nobody approves within this is denied, and the model is told
    max_result_chars: AtLeastOne = 20_000  # of a result, for the model (the rest is cut, with a note saying so)
    max_description_chars: Count = 1_000  # of a tool's description, for the model
    # A crashed server is started again after restart_seconds, doubling up to restart_max_seconds.
    restart_seconds: MoreThanZero = 1.0
    restart_max_seconds: MoreThanZero = 300.0
    # This many failed calls in a row (timeouts, a server gone) open the circuit: calls are answered
    # "unavailable" at once, without reaching the server, for open_seconds; then one call is let through.
    failures_to_open: AtLeastOne = 3
    open_seconds: MoreThanZero = 60.0
    # Where "always" answers are kept as allow rules; empty: tool_rules.toml beside the config file.
    rules_file: str = ""


class WhatsAppConfig(msgspec.Struct, forbid_unknown_fields=True):
    """tars in WhatsApp through Meta's official Cloud API (docs/whatsapp.md): a webhook at
    /channels/whatsapp on the HTTP listener ([http] enabled too), replies through the Graph API.
    The three secrets live in files of mode 0600, never here."""

    enabled: bool = False
    # The business number's id in Meta's app dashboard (not the number itself): messages to any
    # other number of the same app are ignored, and replies are sent from this one.
    phone_number_id: str = ""
    # The user's own numbers, with country code ("353871234567"; "+" and spaces are ignored).
    # Only they reach tars; a message from any other number is logged (hashed) and dropped.
    allowed_senders: list[str] = msgspec.field(default_factory=list)
    # Empty: whatsapp_verify_token, whatsapp_app_secret, whatsapp_access_token beside the config file.
    verify_token_file: str = ""  # the word Meta's dashboard sends back when the webhook is set up
    app_secret_file: str = ""  # the app's secret: every webhook POST is signed with it (X-Hub-Signature-256)
    access_token_file: str = ""  # the (permanent) token tars sends replies with
    graph_url: str = "https://graph.facebook.com/v21.0"
    # Outside WhatsApp's 24-hour window (a day since the user last wrote) only an approved template
    # may be sent: the name of a UTILITY template whose body has one variable {{1}}, which tars fills
    # with its message (docs/whatsapp.md#templates). Empty: tars cannot start a message outside it.
    # Meta's names are lowercase letters, digits and underscores.
    template: Annotated[
        str,
        msgspec.Meta(pattern=r"^[a-z0-9_]{0,512}$", description='a template name of lowercase letters, digits and _: "tars_message"'),
    ] = ""
    # The template's language as WhatsApp Manager names it: "en", "en_US", "de", "pt_BR".
    template_language: Annotated[
        str,
        msgspec.Meta(pattern=r"^[a-z]{2,3}(_[A-Z]{2})?$", description='a language code as WhatsApp Manager writes it: "en", "en_US"'),
    ] = "en"


class TelegramConfig(msgspec.Struct, forbid_unknown_fields=True):
    """tars in Telegram through the Bot API (docs/telegram.md): tars asks Telegram for its bot's
    messages (long polling, an outgoing HTTPS connection only: no public address, no HTTP
    listener needed) and answers through the same API. The bot token lives in a file of mode
    0600, never here."""

    enabled: bool = False
    token_file: str = ""  # empty: telegram_token beside the config file
    # The user's own numeric Telegram user ids (not @usernames: those can be changed and taken
    # by someone else). Only they reach tars; anyone else is logged (hashed) and gets nothing.
    # Text is read too, so that a username written here is named in status rather than refused unexplained.
    allowed_users: list[int | str] = msgspec.field(default_factory=list)
    api_url: str = "https://api.telegram.org"  # tars calls {api_url}/bot{token}/{method}: a self-hosted Bot API server
    # How long one getUpdates call waits for a message before asking again: 1 to 50 (0 would ask
    # without waiting, over and over; Telegram's servers answer after at most 50 s).
    poll_timeout_seconds: Annotated[int, msgspec.Meta(ge=1, le=50)] = 30
    # Webhook mode instead of polling, for a public HTTPS address that reaches tarsd's HTTP listener
    # ([http] enabled): "https://pi.example.ts.net/channels/telegram". Empty: tars polls.
    webhook_url: str = ""
    webhook_secret_file: str = ""  # empty: telegram_webhook_secret beside the config file (Telegram sends it with each post)


# Where a routine's or a reminder's message goes (tarsd/routines): every message is in the inbox
# whatever its targets; the others are delivered from there.
DeliveryTarget = Literal["inbox", "telegram", "whatsapp", "note"]


class RoutinesConfig(msgspec.Struct, forbid_unknown_fields=True):
    """Routines and reminders (tarsd/routines, docs/routines.md): tars speaks first."""

    # false: this machine runs no routines (the other machine of a synced vault does).
    enabled: bool = True
    # The routines file (user-owned, outside the vault); empty: routines.toml beside the config file.
    file: str = ""
    # The user's time zone, an IANA name ("Europe/Berlin"); empty: the machine's.
    timezone: str = ""
    # Where a routine's answer goes unless it says otherwise.
    deliver: list[DeliveryTarget] = msgspec.field(default_factory=lambda: ["inbox"])
    runs_per_day: AtLeastOne = 48  # a routine's limit unless it sets its own
    # The shortest `every` a routine or a repeating reminder may have: each time, a routine runs the
    # model and a repeating reminder messages the phone. A crontab fires at most once a minute.
    min_interval_seconds: Annotated[int, msgspec.Meta(ge=1, le=86400)] = 60
    # A repeating reminder's messages a day unless it sets its own runs_per_day (a one-shot is sent once anyway).
    reminder_runs_per_day: AtLeastOne = 48
    tokens_per_run: AtLeastOne = 50_000
    # A routine's run missed (tarsd stopped, the machine asleep) is still made up for this long
    # after its time; later, it is skipped and listed. Reminders: reminder_grace_hours.
    grace_minutes: Count = 120
    reminder_grace_hours: Count = 24
    # The note the `note` target appends to, relative to the vault; {date} is YYYY-MM-DD in the
    # user's time zone ("Daily/{date}.md"). Empty: the note target needs a routine's own note.
    note: str = ""
    heading: str = "tars"  # the heading the answer is appended under


class Config(msgspec.Struct, forbid_unknown_fields=True):
    vault: VaultConfig = msgspec.field(default_factory=VaultConfig)
    index: IndexConfig = msgspec.field(default_factory=IndexConfig)
    embedder: EmbedderConfig = msgspec.field(default_factory=EmbedderConfig)
    daemon: DaemonConfig = msgspec.field(default_factory=DaemonConfig)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    chat: ChatConfig = msgspec.field(default_factory=ChatConfig)
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    whatsapp: WhatsAppConfig = msgspec.field(default_factory=WhatsAppConfig)
    telegram: TelegramConfig = msgspec.field(default_factory=TelegramConfig)
    routines: RoutinesConfig = msgspec.field(default_factory=RoutinesConfig)

    @property
    def vault_path(self) -> Path:
        if not self.vault.path:
            raise ConfigError("no vault configured: pass --vault PATH, set TARS_VAULT, or set [vault] path in the config file")
        return Path(self.vault.path).expanduser().resolve()

    @property
    def socket_path(self) -> Path:
        from tarsctl.socket_path import default_socket_path

        return Path(self.daemon.socket).expanduser() if self.daemon.socket else default_socket_path()

    @property
    def db_path(self) -> Path:
        if self.index.db_path:
            return Path(self.index.db_path).expanduser().resolve()
        return default_db_path(self.vault_path)


SECTIONS = {
    "vault": VaultConfig,
    "index": IndexConfig,
    "embedder": EmbedderConfig,
    "daemon": DaemonConfig,
    "memory": MemoryConfig,
    "chat": ChatConfig,
    "http": HttpConfig,
    "mcp": McpConfig,
    "whatsapp": WhatsAppConfig,
    "telegram": TelegramConfig,
    "routines": RoutinesConfig,
}


def default_config_file() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def config_file_path(path: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """The config file in use: ``--config``, else ``TARS_CONFIG``, else the platform default."""
    env = os.environ if env is None else env
    return Path(path or env.get("TARS_CONFIG") or default_config_file()).expanduser()


def default_db_path(vault: Path) -> Path:
    """One database per vault, named after the vault and a hash of its full path."""
    digest = hashlib.sha256(str(vault).encode()).hexdigest()[:12]
    return Path(platformdirs.user_data_dir(APP_NAME)) / f"{vault.name or 'vault'}-{digest}.sqlite3"


def load_config(path: Path | None = None, env: dict[str, str] | None = None, **overrides: object) -> Config:
    """Build the config from defaults, the TOML file, the environment, then explicit overrides.

    ``overrides`` use ``section_key`` names, e.g. ``vault_path="/x"``; None values are ignored.
    """
    env = os.environ if env is None else env
    data: dict[str, dict[str, object]] = {}
    explicit = path is not None or "TARS_CONFIG" in env
    file = config_file_path(path, env)
    if file.exists():
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file {file}: {exc}") from exc
    elif explicit:
        raise MissingConfigFile(f"config file {file} does not exist")

    for section, struct in SECTIONS.items():
        for field in msgspec.structs.fields(struct):
            value = env.get(f"TARS_{section}_{field.name}".upper())
            if value is not None:
                # A list from the environment is comma-separated: TARS_HTTP_HOSTNAMES=pi.local,192.168.1.20
                listed = getattr(field.type, "__origin__", None) is list
                data.setdefault(section, {})[field.name] = [v.strip() for v in value.split(",") if v.strip()] if listed else value
    for name, (section, field) in SHORT_ENV_ALIASES.items():
        if name in env:
            data.setdefault(section, {})[field] = env[name]
    for key, value in overrides.items():
        if value is None:
            continue
        section, _, field = key.partition("_")  # sections have no underscore in their names
        data.setdefault(section, {})[field] = str(value) if isinstance(value, Path) else value

    try:
        # strict=False lets environment strings become numbers and booleans.
        config = msgspec.convert(data, Config, strict=False)
    except msgspec.ValidationError as exc:
        from tarsd.config.invalid import explain

        origins = {}
        for section, struct in SECTIONS.items():
            for key in struct.__struct_fields__:
                origin = setting_origin(section, key, env, overrides)
                if origin is not None:
                    origins[(section, key)] = "the command line" if origin == "command line" else origin.removeprefix("env ")
        raise ConfigError(f"invalid configuration: {explain(exc, data, Config, origins, file)}") from exc
    _check_timezone(config.routines.timezone, setting_origin("routines", "timezone", env, overrides), file)
    return config


def _check_timezone(name: str, origin: str | None, file: Path) -> None:
    """An unknown zone name stops tarsd at start, with the key named, rather than every routine failing later."""
    if not name:
        return
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        shown = "the command line" if origin == "command line" else origin.removeprefix("env ") if origin else ""
        where = f"from {shown}" if origin else f"in {file}"
        raise ConfigError(
            f"invalid configuration: [routines] timezone = {name!r} {where} is not a known time zone: "
            'use an IANA name like "Europe/Berlin", or leave it empty for the machine\'s time zone'
        ) from None


def setting_origin(section: str, key: str, env: Mapping[str, str], overrides: Mapping[str, object]) -> str | None:
    """Where a key's value comes from when not from the file or the default: "command line", or
    "env NAME" (a short alias wins over TARS_<SECTION>_<KEY>, as in load_config)."""
    if overrides.get(f"{section}_{key}") is not None:
        return "command line"
    for name, target in SHORT_ENV_ALIASES.items():
        if target == (section, key) and name in env:
            return f"env {name}"
    long_name = f"TARS_{section}_{key}".upper()
    return f"env {long_name}" if long_name in env else None
