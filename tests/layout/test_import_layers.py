"""The house rules for imports, read from the source (ast), so that the package map in
docs/architecture.md stays true: no import circle between modules, and no import from a
lower layer into a higher one.

Every import counts, also one inside a function or under ``if TYPE_CHECKING:``: a circle
hidden in a function is still a circle for whoever reads the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

from harness.paths import REPO

# Lowest first. A module may import from its own layer and the layers before it. A name stands
# for that module or package and everything below it; the longest name that fits a module wins.
# The top-level packages' own __init__ files (named pkg.__init__ here) hold only the version, so
# they sit at the bottom; a tarsd module outside every listed package is an error.
LAYERS: list[tuple[str, ...]] = [
    # The wire, what the client and the daemon share: frames and the socket's place, the messages,
    # and what both read from a user (times like "7d", memory types) or show of a search.
    # shown: text from elsewhere made safe for a terminal (search_view, chat, the channels use it).
    # routine_times: a reminder's WHEN read from words, a run's time said (tarsctl and the channels).
    (
        "tarsctl.__init__",
        "tarsctl.transport",
        "tarsctl.socket_path",
        "tarsctl.arguments",
        "tarsctl.routine_times",
        "tarsctl.shown",
        "tarsctl.search_view",
        "tarsctl.protocol",
        "tarsctl.authority",
    ),
    ("tarsctl.client",),  # talking to tarsd over its socket
    ("tarsctl.mcp",),  # the MCP tool table (tarsctl mcp, and tarsd's /mcp over HTTP)
    ("tarsd.__init__", "tarsd.config"),
    # What tarsd and tarsctl both read of the user's setup: private files (secrets, bearer tokens), the messengers' settings.
    ("tarsd.setup",),
    ("tarsd.markdown",),
    ("tarsd.vault",),
    ("tarsd.embed",),
    ("tarsd.store",),
    ("tarsd.index",),
    ("tarsd.search",),
    ("tarsd.memory",),
    ("tarsd.tools",),  # other MCP servers' tools: connections, policy, approvals
    ("tarsd.routines",),  # routines and reminders, what and when: schedules, the routines file, runs, inbox, clock
    ("tarsd.sync",),  # two machines, one vault: heartbeats, conflict copies merged, the journal replayed, who polls Telegram
    ("tarsd.chat",),
    ("tarsd.serve",),
    ("tarsd.channels",),  # messengers (WhatsApp) on the HTTP listener, through the doors' dispatcher
    ("tarsd.speaking",),  # tars speaks first: routines' runs and delivering what they say (through the dispatcher, the channels)
    ("tarsd.daemon",),
    ("tarsctl",),  # the command line: cli, chat, doctor, service, config and http views
]
PACKAGES = ("tarsd", "tarsctl")
# The command line is a client: it talks to tarsd over its socket, and what it shares with tarsd (the
# config, secret and token files, a messenger's settings) it reads from the low layers, never from
# the daemon's doors, messengers, tools, speaking or wiring, whatever the layer order above allows.
DAEMON_ONLY = ("tarsd.serve", "tarsd.channels", "tarsd.tools", "tarsd.speaking", "tarsd.daemon")
# The one exception, and why: `tarsctl doctor` starts each configured MCP server itself, apart from the
# running tarsd, to list its tools (tarsctl/tools_view.py: probe_servers); the MCP client that does that
# is tarsd.tools' own, and a second one in the client would be a copy.
CLIENT_USES_DAEMON = {("tarsctl.tools_view", "tarsd.tools.servers")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 2:
        parts.pop()  # a sub-package's __init__ is the package itself; a top-level one keeps its name
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The tars modules ``name`` imports (``from pkg import module`` names the module)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in known] or [module]
        else:
            continue
        for target in targets:
            if target in PACKAGES:
                target = f"{target}.__init__"
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    return found - {name}


def layer_of(name: str) -> int:
    fits = [
        (len(prefix), index) for index, names in enumerate(LAYERS) for prefix in names if name == prefix or name.startswith(prefix + ".")
    ]
    assert fits, f"{name} is in no layer: add its package to LAYERS here and to docs/architecture.md"
    return max(fits)[1]


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def test_the_walk_sees_the_imports_it_judges():
    """Guards the test itself: a walk that found nothing would pass everything."""
    edges = graph()
    assert "tarsd.serve.socket_server" in edges
    assert "tarsd.store.database" in edges["tarsd.index.indexer"]
    assert "tarsctl.socket_path" in edges["tarsd.config.settings"]
    assert "tarsd.memory.facts" in edges["tarsd.memory.files"] or "tarsd.memory.lines" in edges["tarsd.memory.files"]
    assert sum(len(deps) for deps in edges.values()) > 150


def test_no_module_imports_from_a_higher_layer():
    wrong = [
        f"{name} (layer {layer_of(name)}) imports {dep} (layer {layer_of(dep)})"
        for name, deps in graph().items()
        for dep in sorted(deps)
        if layer_of(dep) > layer_of(name)
    ]
    assert not wrong, "imports against the layer order (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_command_line_stays_a_client():
    edges = graph()
    command_line = [name for name in edges if name.startswith("tarsctl.") and layer_of(name) == len(LAYERS) - 1]
    assert "tarsctl.channel_doctor" in command_line and "tarsctl.http_access" in command_line
    wrong = [
        f"{name} imports {dep}"
        for name in command_line
        for dep in sorted(edges[name])
        if dep.startswith(tuple(f"{package}." for package in DAEMON_ONLY) + DAEMON_ONLY) and (name, dep) not in CLIENT_USES_DAEMON
    ]
    assert not wrong, "the command line imports the daemon's parts (read what both need from tarsd.setup or tarsd.config):\n" + "\n".join(
        wrong
    )


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (circle := visit(dep)):
                return circle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def test_no_import_circle():
    circle = find_circle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_circle_finder_finds_a_circle():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None
