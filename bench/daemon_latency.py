"""Daemon benchmarks: save-to-searchable latency, tarsctl against rg, client start-up, the
daemon's idle memory, and searches from many clients during a full re-index.

Every figure comes from a real ``tarsd`` subprocess on a temporary vault (bench/common.py's
``build_vault``), talked to over its real Unix socket. The local model embeds only ~10-20
chunks/s on a 2-core box, so the parts that need vectors (``latency`` with the model, ``rss``,
``concurrent --embedder local``) use a smaller vault (--model-notes, default 1,000 notes) and
wait for its embedding backlog to drain first; every table says which vault size it used.

    python bench/daemon_latency.py latency    [--notes N] [--model-notes N] [--runs N] [--embedder none|local|both]
    python bench/daemon_latency.py search     [--model-notes N] [--runs N]   (taskset -c 0 ... for one core)
    python bench/daemon_latency.py no-model   [--notes N] [--runs N]
    python bench/daemon_latency.py backlog    [--notes N] [--runs N]     (keyword freshness during a cold embedding run)
    python bench/daemon_latency.py cli-vs-rg  [--notes N] [--runs N] [--words W ...]
    python bench/daemon_latency.py startup    [--runs N]
    python bench/daemon_latency.py rss        [--model-notes N]
    python bench/daemon_latency.py http       [--model-notes N] [--embedder local|none] [--compare-tree DIR]
    python bench/daemon_latency.py concurrent [--notes N] [--clients N] [--embedder none|local]
    python bench/daemon_latency.py all        (everything above but http, with defaults, in one session)

Whole-process timings use hyperfine (--warmup 3) when it is installed, else subprocess runs
timed with perf_counter after 3 warm-ups (--timer python). Child Pythons run with their bytecode
cached under a temporary PYTHONPYCACHEPREFIX, as an installed tarsctl would (this machine sets
PYTHONDONTWRITEBYTECODE=1, which would recompile tarsctl's modules on every start).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import MODEL_DIR, build_vault, log, met, percentile, print_table, scifact_corpus, scifact_queries  # noqa: E402

from tarsctl.client import Client  # noqa: E402
from tarsctl.protocol import Error, Index, IndexDone, Ping, Progress, Search, SearchResults, Status  # noqa: E402

# ---- targets ----
KEYWORD_P50_MS = 300.0  # save -> found by keyword, embedder none
MODEL_P50_MS = 1000.0  # save -> found by vector search, local model
IDLE_RSS_MB = 180.0  # daemon idle with the model loaded
STARTUP_OVER_PYTHON_MS = 20.0  # tarsctl --version and ping, over `python -c pass`
CONCURRENT_ERRORS = 0

# ---- bounds: every loop below is bounded in count and in time ----
POLL_SECONDS = 0.010  # latency: search every 10 ms
STATUS_POLL_SECONDS = 0.5
MAX_REQUESTS_PER_CLIENT = 200_000
MAX_RECONNECTS = 20
TIMING_DEADLINE_SECONDS = 300.0  # per group of timed commands
RSS_SAMPLES = 5

PYTHON = sys.executable


# ---- small helpers ----


def now() -> float:
    return time.perf_counter()


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} (1 / 5 min) on {os.cpu_count()} cores"


def fmt_ms(value: float | None) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def proc_status(pid: int) -> dict[str, float]:
    """Memory figures (MiB) and thread count of a process, from /proc/PID/status."""
    keys = {"VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"}
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in keys:
                value = rest.split()[0]
                out[key] = int(value) if key == "Threads" else int(value) / 1024
    return out


def tarsctl_command() -> list[str]:
    script = Path(PYTHON).with_name("tarsctl")
    return [str(script)] if script.exists() else [PYTHON, "-m", "tarsctl.cli"]


def child_env(pycache: Path) -> dict[str, str]:
    """The environment for timed child Pythons: bytecode cached (under pycache, outside the
    repository), no TARS_* settings inherited from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TARS_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


# ---- one tarsd subprocess ----


class Daemon:
    def __init__(
        self,
        vault: Path,
        notes: int,
        embedder: str,
        debounce_ms: int,
        state: Path,
        extra_env: dict[str, str] | None = None,
        tree: Path | None = None,
    ):
        """``tree``: run tarsd from this source tree instead (e.g. a `git archive` of main, to compare)."""
        self.vault, self.notes, self.embedder = vault, notes, embedder
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        self.run_dir = Path(tempfile.mkdtemp(prefix="tb-", dir="/tmp"))  # socket paths must stay short
        self.socket = self.run_dir / "tarsd.sock"
        config = state / "config.toml"
        config.write_text("")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TARS_")}
        self.env.update(
            TARS_CONFIG=str(config),
            TARS_SOCKET=str(self.socket),
            TARS_DB=str(state / "index.sqlite3"),
            TARS_MODEL_DIR=str(MODEL_DIR),
            TARS_EMBEDDER=embedder,
            TARS_DAEMON_DEBOUNCE_MS=str(debounce_ms),
        )
        self.env.update(extra_env or {})
        self.cwd = None
        if tree is not None:
            # Run from the other tree: python -m puts the current directory first on sys.path.
            self.cwd = str(tree)
            self.env["PYTHONSAFEPATH"] = ""
        self.log_path = state / "tarsd.log"
        self.process: subprocess.Popen | None = None
        self.ready_seconds = float("nan")
        self.ready_memory: dict[str, float] = {}

    @property
    def label(self) -> str:
        return f"{self.embedder} / {self.notes:,} notes"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, deadline_seconds: float = 120.0) -> None:
        with open(self.log_path, "ab") as err:
            self.process = subprocess.Popen(
                [PYTHON, "-m", "tarsd.daemon.main", "--vault", str(self.vault)],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=self.cwd,
            )
        end = now() + deadline_seconds
        while now() < end:
            if self.process.poll() is not None:
                raise RuntimeError(f"tarsd exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with Client(self.socket, timeout=5) as client:
                    client.call(Ping(id=1))
                return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError(f"tarsd did not answer on {self.socket} within {deadline_seconds:.0f} s:\n{self.log_tail()}")

    def client(self, timeout: float | None = 30.0) -> Client:
        return Client(self.socket, timeout=timeout)

    def status(self):
        with self.client() as client:
            return client.call(Status(id=1))

    def wait_ready(self, expected_files: int, need_vectors: bool, deadline_seconds: float) -> float:
        """Poll Status until every note is indexed, nothing is queued or running (and, with
        need_vectors, no chunk waits for its vector). Returns the seconds it took."""
        started = now()
        end = started + deadline_seconds
        last_report = started
        with self.client() as client:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"tarsd exited with {self.process.returncode}:\n{self.log_tail()}")
                reply = client.call(Status(id=client.next_id()))
                counts = reply.counts
                if need_vectors:
                    done = counts.get("files", 0) >= expected_files and not reply.indexing and reply.queue_depth == 0
                    done = done and counts.get("pending_vectors", 1) == 0 and counts.get("chunks", 0) > 0
                else:  # keywords done: the vector worker may still be busy with a backlog
                    done = counts.get("files", 0) >= expected_files and reply.coverage.reconciled and reply.queue_depth == 0
                if done:
                    return now() - started
                t = now()
                if t > end:
                    raise RuntimeError(f"tarsd [{self.label}] not ready after {deadline_seconds:.0f} s: {counts}")
                if t - last_report >= 30:
                    last_report = t
                    log(
                        f"[{self.label}] waiting for the index after {t - started:,.0f} s: {counts.get('files', 0):,} files, "
                        f"{counts.get('chunks', 0):,} chunks, {counts.get('pending_vectors', 0):,} pending vectors"
                    )
                time.sleep(STATUS_POLL_SECONDS)

    def wait_idle(self, client: Client, need_vectors: bool, deadline_seconds: float = 120.0) -> bool:
        end = now() + deadline_seconds
        while now() < end:
            reply = client.call(Status(id=client.next_id()))
            if not reply.indexing and reply.queue_depth == 0 and (not need_vectors or reply.counts.get("pending_vectors", 1) == 0):
                return True
            time.sleep(0.05)
        return False

    def memory(self) -> dict[str, float]:
        return proc_status(self.pid)

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            log(f"tarsd [{self.label}] did not stop within 60 s of SIGTERM; killing it")
            self.process.kill()
            self.process.wait(timeout=30)
            return None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def log_issues(self) -> list[str]:
        """Warning, error and traceback lines of the daemon's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback", line)]

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.run_dir, ignore_errors=True)


class Session:
    """Vaults and daemons shared by the parts of one run (``all`` reuses them)."""

    def __init__(self, args):
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="tars-daemon-bench-"))
        self.pycache = self.tmp / "pycache"
        self.daemons: dict[tuple[str, int], Daemon] = {}
        self.ready_memory: dict[tuple[str, int], dict[str, float]] = {}  # kept after a daemon stops

    def daemon(self, embedder: str, notes: int, variant: str = "", extra_env: dict[str, str] | None = None, vectors: bool = True) -> Daemon:
        """A ready daemon on a ``notes``-note vault; ``variant`` names a differently configured one
        (``extra_env``); ``vectors=False`` is ready once the keyword index is (a backlog may remain)."""
        key = (embedder + variant, notes)
        if key in self.daemons and self.daemons[key].process.poll() is None:
            return self.daemons[key]
        need_vectors = embedder != "none" and vectors
        vault = self.tmp / f"vault-{embedder}{variant}-{notes}"
        if not vault.exists():
            started = now()
            count = build_vault(vault, notes)
            log(f"built a {count:,}-note vault in {now() - started:.1f} s: {vault}")
        state = self.tmp / f"state-{embedder}{variant}-{notes}"
        daemon = Daemon(vault, notes, embedder, self.args.debounce_ms, state, extra_env)
        started = now()
        try:
            daemon.start()
            log(f"tarsd [{daemon.label}] pid {daemon.pid} answers on {daemon.socket}; waiting for its index")
            files = sum(1 for _ in vault.rglob("*.md"))
            daemon.wait_ready(files, need_vectors, self.args.ready_timeout)
        except BaseException:
            self._report_log(daemon)
            daemon.cleanup()  # never leave a daemon behind
            raise
        daemon.ready_seconds = now() - started
        status = daemon.status()
        log(
            f"tarsd [{daemon.label}] ready after {daemon.ready_seconds:,.1f} s: {status.counts.get('files', 0):,} files, "
            f"{status.counts.get('chunks', 0):,} chunks, {status.counts.get('vectors', 0):,} vectors"
        )
        time.sleep(2.0)  # let the first reconcile's garbage settle before the idle figure
        daemon.ready_memory = self.ready_memory[key] = daemon.memory()
        self.daemons[key] = daemon
        return daemon

    def stop(self, embedder: str, notes: int) -> None:
        daemon = self.daemons.pop((embedder, notes), None)
        if daemon is not None:
            self._report_log(daemon)
            daemon.cleanup()

    def _report_log(self, daemon: Daemon) -> None:
        issues = daemon.log_issues()
        if issues:
            log(f"tarsd [{daemon.label}] logged {len(issues)} warning/error line(s); first ones:")
            for line in issues[:10]:
                log(f"    {line}")

    def close(self) -> None:
        for key in list(self.daemons):
            self.stop(*key)
        if self.args.keep:
            log(f"kept the vaults, databases and logs in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---- whole-process timing ----


def time_commands(commands: dict[str, list[str]], runs: int, env: dict[str, str], timer: str, tmp: Path) -> dict[str, dict]:
    """Median (and friends) wall time in ms of each command, over ``runs`` runs after 3 warm-ups."""
    if timer == "hyperfine":
        out = tmp / f"hyperfine-{secrets.token_hex(4)}.json"
        argv = ["hyperfine", "-N", "-i", "--style", "none", "--warmup", "3", "--runs", str(runs), "--export-json", str(out)]
        for name, command in commands.items():
            argv += ["-n", name, shlex.join(command)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMING_DEADLINE_SECONDS * len(commands))
        if done.returncode != 0:
            raise RuntimeError(f"hyperfine failed ({done.returncode}): {done.stderr.strip()}")
        results = json.loads(out.read_text())["results"]
        return {
            name: {"median": r["median"] * 1000, "mean": r["mean"] * 1000, "min": r["min"] * 1000, "runs": len(r["times"])}
            for name, r in zip(commands, results, strict=True)
        }
    times: dict[str, list[float]] = {name: [] for name in commands}
    end = now() + TIMING_DEADLINE_SECONDS * len(commands)
    for round_number in range(3 + runs):  # interleaved, so drifting load hits every command alike
        if now() > end:
            log(f"timing stopped after {round_number} rounds (time bound)")
            break
        for name, command in commands.items():
            started = now()
            subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
            if round_number >= 3:
                times[name].append((now() - started) * 1000)
    return {
        name: {
            "median": percentile(ts, 50),
            "mean": sum(ts) / len(ts) if ts else float("nan"),
            "min": min(ts, default=float("nan")),
            "runs": len(ts),
        }
        for name, ts in times.items()
    }


def pick_timer(args) -> str:
    if args.timer == "auto":
        return "hyperfine" if shutil.which("hyperfine") else "python"
    if args.timer == "hyperfine" and not shutil.which("hyperfine"):
        sys.exit("hyperfine is not installed (apt-get install hyperfine), use --timer python")
    return args.timer


# ---- 1. save-to-searchable latency ----


def run_latency(session: Session, embedder: str, runs: int) -> None:
    args = session.args
    local = embedder != "none"
    notes = args.model_notes if local else args.notes
    daemon = session.daemon(embedder, notes)
    vault = daemon.vault
    rng = random.Random(1)

    # Text for new notes: SciFact abstracts the vault does not hold (so no chunk can come from
    # the embedding cache), or any abstract when the vault holds them all.
    corpus = scifact_corpus()
    present = {p.stem for p in (vault / "scifact").glob("*.md")}
    fresh = [d for d in corpus if d["_id"] not in present] or corpus
    rng.shuffle(fresh)
    editable = sorted((vault / "scifact").glob("*.md"))
    rng.shuffle(editable)

    rows: list[dict] = []
    with daemon.client(timeout=60) as client:
        for i in range(runs):
            if not daemon.wait_idle(client, need_vectors=local):
                log(f"latency run {i}: the daemon did not become idle within 120 s; measuring anyway")
            time.sleep(0.1)
            token = f"tarslat{i:03d}q{secrets.token_hex(5)}"
            doc = fresh[i % len(fresh)]
            kind = "new" if local or i % 2 == 0 else "edit"
            if kind == "new":
                rel = f"latency-{i:03d}-{token}.md"
                content = f"# {doc['title']}\n\n{doc['text']}\n\nBenchmark token: {token}\n"
            else:
                path = editable[i % len(editable)]
                rel = path.relative_to(vault).as_posix()
                content = path.read_text(encoding="utf-8") + f"\n\nEdited for the benchmark: {token}\n"
            vec_query = f"{doc['title']}. {doc['text'][:300]}"
            target = vault / rel

            started = now()
            with open(target, "w", encoding="utf-8") as handle:  # an in-place save, like most editors
                handle.write(content)
            fts_ms = vec_ms = None
            error = ""
            end = started + args.poll_timeout
            polls = 0
            while now() < end and polls < int(args.poll_timeout / POLL_SECONDS) + 1:
                polls += 1
                tick = now()
                try:
                    if fts_ms is None:
                        reply = client.call(Search(id=client.next_id(), query=token, mode="fts", limit=10))
                        if any(hit.path == rel for hit in reply.results):
                            fts_ms = (now() - started) * 1000
                    if local and vec_ms is None:
                        reply = client.call(Search(id=client.next_id(), query=vec_query, mode="vec", limit=10))
                        if any(hit.path == rel for hit in reply.results):
                            vec_ms = (now() - started) * 1000
                except Exception as exc:  # noqa: BLE001 - an error reply or a broken connection is a figure too
                    error = f"{type(exc).__name__}: {exc}"
                    break
                if fts_ms is not None and (not local or vec_ms is not None):
                    break
                time.sleep(max(0.0, POLL_SECONDS - (now() - tick)))
            rows.append({"kind": kind, "fts": fts_ms, "vec": vec_ms, "error": error})
            shown = f"fts {fmt_ms(fts_ms)} ms" + (f", vec {fmt_ms(vec_ms)} ms" if local else "")
            log(f"latency [{embedder}] {i + 1}/{runs} {kind}: {shown}{' ' + error if error else ''}")
        daemon.wait_idle(client, need_vectors=local)

    table = []
    if local:
        groups = [("keyword (fts) finds the new note", "fts", None), ("vector (vec) finds the new note", "vec", MODEL_P50_MS)]
        for label, key, target_ms in groups:
            table.append(latency_row(label, [r[key] for r in rows], [r["error"] for r in rows], target_ms))
    else:
        for kind in ("new", "edit"):
            chosen = [r for r in rows if r["kind"] == kind]
            table.append(latency_row(f"{kind} note, keyword (fts)", [r["fts"] for r in chosen], [r["error"] for r in chosen], None))
        table.append(latency_row("all saves, keyword (fts)", [r["fts"] for r in rows], [r["error"] for r in rows], KEYWORD_P50_MS))
    size = f"{daemon.notes:,}-note vault" + (" (the --model-notes vault: embedding 10,000 notes takes ~30-40 min here)" if local else "")
    print_table(
        ["save -> searchable", "saves", "found", "p50 ms", "p99 ms", "max ms", "target", "met"],
        table,
        f"Save-to-searchable latency, embedder {embedder}, {size}; debounce {args.debounce_ms} ms, "
        f"one connection polling every {POLL_SECONDS * 1000:.0f} ms; {load()}",
    )
    errors = [r["error"] for r in rows if r["error"]]
    if errors:
        print(f"errors: {len(errors)}, first: {errors[0]}")


def latency_row(label: str, values: list[float | None], errors: list[str], target_ms: float | None) -> list[object]:
    found = [v for v in values if v is not None]
    p50, p99 = percentile(found, 50), percentile(found, 99)
    missing = len(values) - len(found)
    target = f"p50 <= {target_ms:,.0f} ms" if target_ms else ""
    ok = "" if not target_ms else met(bool(found) and p50 <= target_ms and missing == 0)
    return [label, len(values), len(found), fmt_ms(p50), fmt_ms(p99), fmt_ms(max(found, default=None)), target, ok]


def time_searches(daemon: Daemon, modes: tuple[str, ...], queries: list[str]) -> dict[str, list[float]]:
    """Round-trip ms of queries in each mode over one socket connection, after a warm-up on
    other queries. The modes take turns (drift in the machine's load hits them alike) and each
    gets its own queries, so none finds its query's vector cached by another."""
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    warmup, queries = queries[:5], queries[5:]
    with daemon.client(timeout=120) as client:
        for query in warmup:
            for mode in modes:
                client.call(Search(id=client.next_id(), query=query, mode=mode, limit=10))
        for start in range(0, len(queries) - len(modes) + 1, len(modes)):
            for mode, query in zip(modes, queries[start : start + len(modes)], strict=True):
                started = now()
                reply = client.call(Search(id=client.next_id(), query=query, mode=mode, limit=10))
                times[mode].append((now() - started) * 1000)
                if isinstance(reply, Error):
                    raise RuntimeError(f"{mode} search failed: {reply.message}")
    return times


def cores() -> str:
    count = len(os.sched_getaffinity(0))
    return f"{count} core{'s' if count != 1 else ''} (taskset)" if count < (os.cpu_count() or count) else f"{count} cores"


def run_search(session: Session, runs: int) -> None:
    """Search round trips per mode over the socket on the model vault; run it under
    `taskset -c 0` too for the one-core (Pi stand-in) figure."""
    daemon = session.daemon("local", session.args.model_notes)
    queries = list(dict.fromkeys(scifact_queries().values()))[: 5 + 3 * runs]
    times = time_searches(daemon, ("fts", "vec", "hybrid"), queries)
    rows = [[mode, len(v), fmt_ms(percentile(v, 50)), fmt_ms(percentile(v, 99))] for mode, v in times.items()]
    print_table(
        ["mode", "searches", "p50 ms", "p99 ms"],
        rows,
        f"Search round trips over the socket (query embedding included, cache cold per query), {daemon.notes:,}-note model vault, "
        f"{cores()}; {load()}",
    )


class SilentHub:
    """A model hub on 127.0.0.1 that accepts connections and never answers (a captive portal,
    a dead proxy): the worst case for a first download."""

    def __init__(self):
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)  # the kernel completes the handshakes; nothing ever reads or writes
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()


def run_no_model(session: Session, runs: int) -> None:
    """No model on disk and no reachable hub: hybrid answers from keywords, and must not be
    much slower than --mode fts (target p50 within 2x). Two ways to be without a model: a
    model_dir that is empty, and no model_dir with an empty cache and a hub that accepts
    connections and never answers (the download hangs in the background)."""
    hub = SilentHub()
    empty = session.tmp / "no-model"
    empty.mkdir(exist_ok=True)
    variants = {
        "model_dir empty": {"TARS_MODEL_DIR": str(empty)},
        "download hangs": {"TARS_MODEL_DIR": "", "HF_ENDPOINT": hub.url, "XDG_CACHE_HOME": str(session.tmp / "empty-cache")},
    }
    rows = []
    notes = session.args.notes
    try:
        for number, (label, env) in enumerate(variants.items()):
            daemon = session.daemon("local", notes, variant=f"-nomodel{number}", extra_env=env, vectors=False)
            ready = daemon.ready_seconds
            queries = list(dict.fromkeys(scifact_queries().values()))[: 5 + 2 * runs]
            times = time_searches(daemon, ("fts", "hybrid"), queries)
            status = daemon.status()
            session.stop(f"local-nomodel{number}", notes)
            fts50, hyb50 = percentile(times["fts"], 50), percentile(times["hybrid"], 50)
            rows.append(
                [label, f"{ready:,.1f}", fmt_ms(fts50), fmt_ms(hyb50), fmt_ms(percentile(times["hybrid"], 99)), met(hyb50 <= 2 * fts50)]
            )
            log(f"[{label}] embedder {status.embedder.state}: {status.embedder.reason[:160]}")
    finally:
        hub.close()
    print_table(
        ["without a model", "ready s (keywords)", "fts p50 ms", "hybrid p50 ms", "hybrid p99 ms", "hybrid p50 <= 2x fts"],
        rows,
        f"No model and no network, {notes:,}-note vault; {cores()}; {load()}",
    )


def run_backlog(session: Session, runs: int) -> None:
    """Save -> searchable by keyword while the whole vault's vectors are still being made
    (a first run): keyword freshness must not wait behind the embedding backlog."""
    args = session.args
    daemon = session.daemon("local", args.notes, variant="-backlog", vectors=False)
    rng = random.Random(2)
    corpus = scifact_corpus()
    rng.shuffle(corpus)
    found: list[float | None] = []
    with daemon.client(timeout=60) as client:
        pending_before = client.call(Status(id=client.next_id())).counts.get("pending_vectors", 0)
        for i in range(runs):
            token = f"tarsbacklog{i:03d}q{secrets.token_hex(5)}"
            doc = corpus[i % len(corpus)]
            rel = f"backlog-{i:03d}-{token}.md"
            started = now()
            (daemon.vault / rel).write_text(f"# {doc['title']}\n\n{doc['text']}\n\n{token}\n", encoding="utf-8")
            hit_ms = None
            while now() - started < args.poll_timeout:
                reply = client.call(Search(id=client.next_id(), query=token, mode="fts", limit=5))
                if any(hit.path == rel for hit in reply.results):
                    hit_ms = (now() - started) * 1000
                    break
                time.sleep(POLL_SECONDS)
            found.append(hit_ms)
            log(f"backlog {i + 1}/{runs}: fts {fmt_ms(hit_ms)} ms")
            time.sleep(0.2 + rng.random() * 0.3)
        pending_after = client.call(Status(id=client.next_id())).counts.get("pending_vectors", 0)
    print_table(
        ["save -> searchable", "saves", "found", "p50 ms", "p99 ms", "max ms", "target", "met"],
        [latency_row("keyword (fts), during the embedding backlog", found, [""] * len(found), KEYWORD_P50_MS)],
        f"Save-to-searchable during a cold embedding backlog, {daemon.notes:,}-note vault: {pending_before:,} vectors pending at "
        f"the first save, {pending_after:,} at the last; {cores()}; {load()}",
    )
    session.stop("local-backlog", args.notes)


# ---- 2. tarsctl search against rg -il ----


def pick_words(vault: Path) -> list[tuple[str, str]]:
    """A common, a medium, a rare and an absent word of the vault's notes, by document frequency
    (whole words of 6+ letters outside front matter that tarsd does not drop as stopwords)."""
    from tarsd.search.searcher import STOPWORDS

    df: Counter[str] = Counter()
    files = sorted(vault.rglob("*.md"))
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace").lower()
        text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.DOTALL)  # front matter (ids and such)
        # Whole tokens as FTS5's unicode61 sees them, so that a word rg finds is a word tarsd indexed.
        df.update(t for t in set(re.findall(r"[a-z0-9]+", text)) if len(t) >= 6 and t.isalpha())
    n = len(files)
    words = sorted(w for w in df if w not in STOPWORDS)  # sorted: deterministic tie-breaks

    def closest(share: float) -> str:
        return min(words, key=lambda w: (abs(df[w] - share * n), w))

    rare = [w for w in words if df[w] == 1 and len(w) >= 7]
    picked = [("common", closest(0.30)), ("medium", closest(0.01)), ("rare", random.Random(2).choice(rare) if rare else closest(0.0))]
    absent = "zqxjvkwplm"
    if absent not in df:
        picked.append(("absent", absent))
    return picked


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_quiet(pid: int, deadline_seconds: float = 60.0, window: float = 0.5) -> float:
    """Wait until a process uses (almost) no CPU for ``window`` seconds; returns the seconds waited."""
    started = now()
    while now() - started < deadline_seconds:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before <= 0.02:
            break
    return now() - started


def run_cli_vs_rg(session: Session, runs: int) -> None:
    args = session.args
    if not shutil.which("rg"):
        sys.exit("ripgrep is not installed: apt-get install -y ripgrep")
    timer = pick_timer(args)
    daemon = session.daemon("none", args.notes)
    vault = daemon.vault
    env = child_env(session.pycache)
    words = [("given", w) for w in args.words] if args.words else pick_words(vault)
    tarsctl = tarsctl_command()
    files = sum(1 for _ in vault.rglob("*.md"))

    # Reading the vault is not free for the daemon: its watcher hears every open and close.
    overflows_before = sum("queue overflowed; filesystem events were lost" in line for line in daemon.log_issues())
    passes = 5
    wait_quiet(daemon.pid)
    cpu_before, started = cpu_seconds(daemon.pid), now()
    for _ in range(passes):
        subprocess.run(["rg", "-il", "zqxjvkwplm", str(vault)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    rg_seconds = now() - started
    settle = wait_quiet(daemon.pid)
    daemon_cpu = cpu_seconds(daemon.pid) - cpu_before

    rows = []
    for kind, word in words:
        cli = [*tarsctl, "--socket", str(daemon.socket), "search", "--mode", "fts", word]
        rg = ["rg", "-il", word, str(vault)]
        # Check once what each returns (not timed).
        hits = subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, timeout=60)
        if hits.returncode != 0:
            raise RuntimeError(f"{shlex.join(cli)} failed ({hits.returncode}): {hits.stderr.strip()}")
        listed = subprocess.run(rg, env=env, capture_output=True, text=True, timeout=60)
        if listed.returncode not in (0, 1):
            raise RuntimeError(f"{shlex.join(rg)} failed ({listed.returncode}): {listed.stderr.strip()}")
        n_cli, n_rg = len(hits.stdout.splitlines()), len(listed.stdout.splitlines())
        log(f"cli-vs-rg: timing {word!r} ({kind}; rg lists {n_rg:,} files) with {timer}")
        # Separately, each after the daemon has gone quiet: rg's reads keep the daemon's
        # watcher busy for a while, which would otherwise be charged to tarsctl.
        wait_quiet(daemon.pid)
        a = time_commands({"tarsctl": cli}, runs, env, timer, session.tmp)["tarsctl"]["median"]
        b = time_commands({"rg": rg}, runs, env, timer, session.tmp)["rg"]["median"]
        rows.append([f"{word} ({kind})", f"{n_rg:,}", n_cli, fmt_ms(a), fmt_ms(b), f"{a / b:.2f}", "tarsctl <= rg", met(a <= b)])
    print_table(
        ["word", "rg files", "tarsctl hits", "tarsctl ms", "rg -il ms", "tarsctl/rg", "target", "met"],
        rows,
        f"`tarsctl search --mode fts WORD` (limit 10) against `rg -il WORD VAULT`, end to end: {files:,}-note vault, "
        f"median of {runs} runs each ({timer}); {load()}",
    )
    rg_version = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    print(f"tarsctl = {shlex.join(tarsctl)}; rg = {rg_version}")
    overflows = sum("queue overflowed; filesystem events were lost" in line for line in daemon.log_issues()) - overflows_before
    print(
        f"side effect: {passes} rg passes over the vault ({rg_seconds:.1f} s) cost the idle daemon {daemon_cpu * 1000:,.0f} ms of CPU "
        f"({daemon_cpu / passes * 1000:,.0f} ms per pass; quiet again {settle:.1f} s after the last); "
        f"inotify queue overflows logged by tarsd during this part: {overflows}"
    )


# ---- 3. client start-up ----


def run_startup(session: Session, runs: int) -> None:
    args = session.args
    timer = pick_timer(args)
    running = [d for d in session.daemons.values() if d.process.poll() is None]
    daemon = running[0] if running else session.daemon("none", min(args.notes, 100))
    env = child_env(session.pycache)
    tarsctl = tarsctl_command()
    full_client = "import sys; from tarsctl.cli import main; sys.exit(main(sys.argv[1:]))"
    commands = {
        "python -c pass": [PYTHON, "-c", "pass"],
        "python -I -S -c pass": [PYTHON, "-I", "-S", "-c", "pass"],
        "tarsctl --version": [*tarsctl, "--version"],
        "tarsctl ping": [*tarsctl, "--socket", str(daemon.socket), "ping"],
        "tarsctl search --mode fts WORD": [*tarsctl, "--socket", str(daemon.socket), "search", "--mode", "fts", "note"],
        "ping through the full client (cli.py)": [PYTHON, "-c", full_client, "--socket", str(daemon.socket), "ping"],
    }
    for name, command in commands.items():
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr.strip()}")
    log(f"startup: timing {len(commands)} commands with {timer}")
    timed = time_commands(commands, runs, env, timer, session.tmp)
    # The environment as this machine configures it: no bytecode written, so tarsctl's own
    # modules (an editable install without __pycache__) are compiled on every start.
    raw_env = {k: v for k, v in os.environ.items() if not k.startswith("TARS_")}
    uncached = {}
    if raw_env.get("PYTHONDONTWRITEBYTECODE"):
        uncached = time_commands(
            {"tarsctl --version (PYTHONDONTWRITEBYTECODE=1)": [*tarsctl, "--version"]}, runs, raw_env, timer, session.tmp
        )
    base = timed["python -c pass"]["median"]
    rows = []
    for name, figures in {**timed, **uncached}.items():
        median = figures["median"]
        over = median - base
        targeted = name in ("tarsctl --version", "tarsctl ping")
        rows.append(
            [
                name,
                figures["runs"],
                fmt_ms(median),
                fmt_ms(figures["min"]),
                "" if name == "python -c pass" else f"{over:+,.1f}",
                "" if name == "python -c pass" else f"{median / base:.2f}x",
                f"<= +{STARTUP_OVER_PYTHON_MS:g} ms" if targeted else "",
                met(over <= STARTUP_OVER_PYTHON_MS) if targeted else "",
            ]
        )
    editable = any(Path(sysconfig.get_paths()["purelib"]).glob("__editable__*tars*.pth"))
    print_table(
        ["command", "runs", "median ms", "min ms", "over python -c pass", "ratio", "target", "met"],
        rows,
        f"Client start-up ({timer}; same interpreter {PYTHON}, bytecode cached); ping and search against tarsd [{daemon.label}]; {load()}"
        + (
            "; NOTE: tars is an editable install here, whose import finder slows every start: "
            "measure with a regular install (pip install .) for the figure a user sees"
            if editable
            else "; a regular install (not editable), as a user's"
        ),
    )
    importtime_summary(env, [PYTHON, "-X", "importtime", "-m", "tarsctl", "--version"])
    importtime_summary(env, [PYTHON, "-X", "importtime", "-c", full_client, "--version"], top=5)


def importtime_summary(env: dict[str, str], command: list[str], top: int = 10) -> None:
    """The slowest top-level imports of ``command`` (a `python -X importtime ...`)."""
    for _ in range(3):  # the last of three runs, bytecode warm
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    entries = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)", line)
        if match:
            self_us, cumulative_us, indent, name = int(match[1]), int(match[2]), len(match[3]), match[4]
            entries.append((name, self_us, cumulative_us, indent))
    top_level = [e for e in entries if e[3] == 1]
    total = sum(e[2] for e in top_level)
    heavy = sorted(top_level, key=lambda e: -e[2])[:top]
    rows = [[name, f"{cum / 1000:.2f}", f"{self_us / 1000:.2f}"] for name, self_us, cum, _ in heavy]
    print_table(
        ["top-level import", "cumulative ms", "self ms"],
        rows,
        f"`{' '.join(['python', *command[1:]])}`: {len(entries)} modules imported, {total / 1000:.1f} ms in top-level imports",
    )
    by_self = sorted(entries, key=lambda e: -e[1])[:top]
    rows = [[("  " * (indent - 1)) + name, f"{self_us / 1000:.2f}", f"{cum / 1000:.2f}"] for name, self_us, cum, indent in by_self]
    print_table(["module (indented by import depth)", "self ms", "cumulative ms"], rows, "Heaviest modules by their own import time")
    daemon_side = sorted(
        {
            e[0]
            for e in entries
            if e[0].split(".")[0] in {"tarsd", "apsw", "sqlite_vec", "fastembed", "onnxruntime", "numpy", "watchdog", "apscheduler"}
        }
    )
    print("daemon-side modules imported by the client: " + (", ".join(daemon_side) if daemon_side else "none"))


# ---- 4. idle memory with the model ----


def run_rss(session: Session) -> None:
    args = session.args
    daemon = session.daemon("local", args.model_notes)
    with daemon.client(timeout=60) as client:
        daemon.wait_idle(client, need_vectors=True, deadline_seconds=300)
        status = client.call(Status(id=client.next_id()))
        time.sleep(args.settle)
        samples = []
        for _ in range(RSS_SAMPLES):
            samples.append(daemon.memory())
            time.sleep(1.0)
        queries = list(scifact_queries().values())[:20]
        for query in queries:
            client.call(Search(id=client.next_id(), query=query, mode="hybrid", limit=10))
        time.sleep(1.0)
        after = daemon.memory()
    idle = max(s["VmRSS"] for s in samples)
    last = samples[-1]
    rows = [
        [f"VmRSS idle, max of {RSS_SAMPLES} samples 1 s apart", f"{idle:,.0f}", f"<= {IDLE_RSS_MB:.0f} MB", met(idle <= IDLE_RSS_MB)],
        ["  of which RssAnon (heap)", f"{last['RssAnon']:,.0f}", "", ""],
        ["  of which RssFile (mapped files: libraries, model)", f"{last['RssFile']:,.0f}", "", ""],
        [f"VmRSS after {len(queries)} hybrid searches", f"{after['VmRSS']:,.0f}", "", ""],
        ["VmHWM (peak since start, including the first embedding)", f"{after['VmHWM']:,.0f}", "", ""],
        ["threads", f"{int(after['Threads'])}", "", ""],
    ]
    for (embedder, notes), memory in session.ready_memory.items():
        if embedder == "none":
            rows.append(
                [
                    f"for comparison: embedder none, {notes:,} notes, VmRSS idle after its first index",
                    f"{memory['VmRSS']:,.0f}",
                    "",
                    "",
                ]
            )
    counts = status.counts
    print_table(
        ["tarsd memory (/proc/PID/status)", "MB", "target", "met"],
        rows,
        f"tarsd RSS with the local model loaded, idle after the index is complete: {daemon.notes:,}-note vault "
        f"({counts.get('chunks', 0):,} chunks, {counts.get('vectors', 0):,} vectors; ready in {daemon.ready_seconds:,.0f} s), "
        f"{args.settle:g} s settle; {load()}",
    )


# ---- 4b. the HTTP listener's memory ----


def idle_rss(daemon: Daemon, need_vectors: bool, settle: float) -> tuple[float, dict[str, float]]:
    """The idle figure as run_rss takes it: index complete, settle, max VmRSS of RSS_SAMPLES samples 1 s apart."""
    with daemon.client(timeout=60) as client:
        daemon.wait_idle(client, need_vectors=need_vectors, deadline_seconds=300)
        # The model loads in the background: a figure taken before it is there (or a search that
        # falls back to keywords meanwhile) would compare unlike with like.
        end = now() + 300
        while need_vectors and client.call(Status(id=client.next_id())).embedder.state != "ready" and now() < end:
            time.sleep(0.2)
    time.sleep(settle)
    samples = []
    for _ in range(RSS_SAMPLES):
        samples.append(daemon.memory())
        time.sleep(1.0)
    return max(s["VmRSS"] for s in samples), samples[-1]


def run_http(session: Session) -> None:
    """tarsd's RSS with the HTTP listener off (this tree, and --compare-tree if given) and on, on one
    vault and database; then on after serving the page, searches, status and conversations over HTTP."""
    import httpx

    args = session.args
    embedder = args.embedder if args.embedder in ("none", "local") else "local"
    need_vectors = embedder != "none"
    notes = args.model_notes if need_vectors else args.notes
    # The vault and its index are built first; every daemon measured then starts on that database,
    # so none of them carries the heap of a cold index.
    builder = session.daemon(embedder, notes)
    vault, state = builder.vault, builder.state
    session.stop(embedder, notes)

    queries = list(scifact_queries().values())[:20]
    mode = "hybrid" if need_vectors else "fts"

    socket_ms: list[float] = []

    def measure_off(tree: Path | None) -> tuple[float, dict[str, float], dict[str, float]]:
        """Idle, then after the same searches over the socket."""
        daemon = Daemon(vault, notes, embedder, args.debounce_ms, state, tree=tree)
        try:
            daemon.start()
            idle, last = idle_rss(daemon, need_vectors, args.settle)
            with daemon.client(timeout=60) as client:
                for query in queries:
                    tick = now()
                    client.call(Search(id=client.next_id(), query=query, mode=mode, limit=10))
                    if tree is None:
                        socket_ms.append((now() - tick) * 1000)
            time.sleep(1.0)
            return idle, last, daemon.memory()
        finally:
            daemon.cleanup()

    off_rss, off_last, off_after = measure_off(None)
    rows = [
        ["listener off (the default), idle", f"{off_rss:,.0f}", f"{off_last['RssAnon']:,.0f}", "", ""],
        [
            f"listener off, after {len(queries)} searches over the socket",
            f"{off_after['VmRSS']:,.0f}",
            f"{off_after['RssAnon']:,.0f}",
            "",
            f"search p50 {percentile(socket_ms, 50):,.1f} ms",
        ],
    ]
    if args.compare_tree:
        base_rss, base_last, base_after = measure_off(Path(args.compare_tree).resolve())
        rows += [
            [
                f"listener off, tarsd from {args.compare_tree}, idle",
                f"{base_rss:,.0f}",
                f"{base_last['RssAnon']:,.0f}",
                f"{base_rss - off_rss:+,.0f}",
                "",
            ],
            [
                f"listener off, tarsd from {args.compare_tree}, after the searches",
                f"{base_after['VmRSS']:,.0f}",
                f"{base_after['RssAnon']:,.0f}",
                f"{base_after['VmRSS'] - off_after['VmRSS']:+,.0f}",
                "",
            ],
        ]

    on = Daemon(vault, notes, embedder, args.debounce_ms, state, extra_env={"TARS_HTTP_ENABLED": "1", "TARS_HTTP_PORT": "0"})
    try:
        on.start()
        on_rss, on_last = idle_rss(on, need_vectors, args.settle)
        url = on.status().http.url
        token = (state / "http_token").read_text().strip()
        started = now()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as web:
            for path in ("/", "/app.js", "/app.css", "/openapi.json", "/status", "/conversations"):
                web.get(path).raise_for_status()
            latencies = []
            for query in queries:
                tick = now()
                web.get("/search", params={"q": query, "mode": mode, "limit": 10}).raise_for_status()
                latencies.append((now() - tick) * 1000)
        served = now() - started
        time.sleep(1.0)
        after = on.memory()
    finally:
        on.cleanup()
    rows += [
        ["listener on, idle", f"{on_rss:,.0f}", f"{on_last['RssAnon']:,.0f}", f"{on_rss - off_rss:+,.0f}", ""],
        [
            f"listener on, after the page and {len(queries)} searches over HTTP",
            f"{after['VmRSS']:,.0f}",
            f"{after['RssAnon']:,.0f}",
            f"{after['VmRSS'] - off_after['VmRSS']:+,.0f}",
            f"search p50 {percentile(latencies, 50):,.1f} ms",
        ],
    ]
    print_table(
        ["tarsd memory (/proc/PID/status)", "VmRSS MB", "RssAnon MB", "vs off (same point)", "note"],
        rows,
        f"tarsd RSS with the HTTP listener off and on, embedder {embedder}, {notes:,}-note vault, one database, idle after "
        f"the index is complete ({args.settle:g} s settle, max of {RSS_SAMPLES} samples); served in {served:.1f} s; {load()}",
    )


# ---- 5. many clients during a full re-index ----


class SearchClient(threading.Thread):
    def __init__(self, daemon: Daemon, number: int, modes: tuple[str, ...], queries: list[str], stop: threading.Event, hard_end: float):
        super().__init__(daemon=True, name=f"client-{number}")
        self.tars = daemon
        self.number, self.modes, self.queries, self.stop_event, self.hard_end = number, modes, queries, stop, hard_end
        self.latencies: list[float] = []
        self.served: list[float] = []  # the daemon's own elapsed_ms for the search
        self.errors: list[str] = []
        self.empty = 0
        self.warnings = 0
        self.ready = threading.Event()

    def run(self) -> None:
        client = None
        reconnects = 0
        i = self.number * 37
        try:
            while (
                not self.stop_event.is_set() and len(self.latencies) + len(self.errors) < MAX_REQUESTS_PER_CLIENT and now() < self.hard_end
            ):
                if client is None:
                    if reconnects > MAX_RECONNECTS:
                        break
                    try:
                        client = self.tars.client(timeout=60)
                        client.connect()
                    except Exception as exc:  # noqa: BLE001
                        self.errors.append(f"connect: {type(exc).__name__}: {exc}")
                        client = None
                        reconnects += 1
                        time.sleep(0.1)
                        continue
                    finally:
                        self.ready.set()
                query = self.queries[i % len(self.queries)]
                mode = self.modes[i % len(self.modes)]
                i += 1
                started = now()
                try:
                    reply = client.call(Search(id=client.next_id(), query=query, mode=mode, limit=10))
                    if not isinstance(reply, SearchResults):
                        raise TypeError(f"unexpected reply {type(reply).__name__}")
                except Exception as exc:  # noqa: BLE001 - RemoteError (an Error reply) included
                    self.errors.append(f"{mode}: {type(exc).__name__}: {exc}")
                    client.close()
                    client = None
                    reconnects += 1
                    continue
                self.latencies.append((now() - started) * 1000)
                self.served.append(reply.elapsed_ms)
                self.empty += not reply.results
                self.warnings += bool(reply.warnings)
        finally:
            self.ready.set()
            if client is not None:
                client.close()


def run_clients(daemon: Daemon, count: int, modes: tuple[str, ...], queries: list[str], during, hard_seconds: float):
    """Start ``count`` searching clients, run ``during()`` while they search, then stop them."""
    stop = threading.Event()
    hard_end = now() + hard_seconds
    clients = [SearchClient(daemon, k, modes, queries, stop, hard_end) for k in range(count)]
    for c in clients:
        c.start()
    for c in clients:
        c.ready.wait(timeout=30)
    started = now()
    try:
        result = during()
    finally:
        stop.set()
        elapsed = now() - started
        for c in clients:
            c.join(timeout=90)
    return clients, elapsed, result


def run_concurrent(session: Session) -> None:
    args = session.args
    local = args.embedder == "local"
    notes = args.model_notes if local else args.notes
    daemon = session.daemon(args.embedder, notes)
    modes = ("hybrid",) if local else ("fts", "hybrid")
    queries = list(dict.fromkeys(scifact_queries().values()))[:200]

    def reindex() -> dict:
        progress_events = 0
        final = None
        with daemon.client(timeout=args.ready_timeout) as client:
            for reply in client.stream(Index(id=client.next_id(), full=True)):
                if isinstance(reply, Progress):
                    progress_events += 1
                elif isinstance(reply, (IndexDone, Error)):
                    final = reply
        return {"progress": progress_events, "final": final}

    baseline = None
    if args.baseline:
        log(f"concurrent: a full re-index of the {notes:,}-note vault without clients (baseline)")
        baseline = reindex()["final"]
    idle = lambda: time.sleep(args.idle_seconds)  # noqa: E731
    log(f"concurrent: 1 client, then {args.clients} clients, {args.idle_seconds:g} s each without indexing")
    single_clients, single_seconds, _ = run_clients(daemon, 1, modes, queries, idle, args.idle_seconds + 120)
    idle_clients, idle_seconds, _ = run_clients(daemon, args.clients, modes, queries, idle, args.idle_seconds + 120)
    log(f"concurrent: {args.clients} clients during a full re-index of the {notes:,}-note vault")
    busy_clients, busy_seconds, outcome = run_clients(daemon, args.clients, modes, queries, reindex, args.ready_timeout)
    final = outcome["final"]

    rows = []
    phases = (
        ("1 client, no indexing", single_clients, single_seconds, False),
        (f"{args.clients} clients, no indexing", idle_clients, idle_seconds, True),
        (f"{args.clients} clients, full re-index", busy_clients, busy_seconds, True),
    )
    for label, clients, seconds, judged in phases:
        latencies = [x for c in clients for x in c.latencies]
        errors = [e for c in clients for e in c.errors]
        served = [x for c in clients for x in c.served]
        rows.append(
            [
                label,
                f"{seconds:,.1f}",
                f"{len(latencies) + len(errors):,}",
                len(errors),
                f"{len(latencies) / seconds:,.0f}" if seconds else "-",
                fmt_ms(percentile(latencies, 50)),
                fmt_ms(percentile(latencies, 99)),
                fmt_ms(max(latencies, default=None)),
                fmt_ms(percentile(served, 50)),
                sum(c.empty for c in clients),
                sum(c.warnings for c in clients),
                "errors = 0" if judged else "",
                met(len(errors) == CONCURRENT_ERRORS) if judged else "",
            ]
        )
    print_table(
        [
            "phase",
            "seconds",
            "requests",
            "errors",
            "req/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "in-daemon p50",
            "empty",
            "warned",
            "target",
            "met",
        ],
        rows,
        f"Concurrent clients (own connection each, no think time; modes {'/'.join(modes)}, limit 10), embedder "
        f"{args.embedder}, {notes:,}-note vault; {load()}",
    )
    print("in-daemon p50: the search's own time as tarsd measures it (elapsed_ms); the rest of p50 is queueing and transport")
    for label, report, extra in (
        ("re-index without clients", baseline, ""),
        (f"re-index under {args.clients} clients", final, f" ({outcome['progress']} progress events)"),
    ):
        if report is None:
            continue
        if isinstance(report, IndexDone):
            print(
                f"{label} (Index full=True): {report.scanned:,} scanned, {report.indexed:,} indexed, {report.chunks:,} chunks, "
                f"{report.vectors_from_cache:,} vectors from cache, {report.vectors_embedded:,} embedded, "
                f"{report.pending_vectors:,} pending, "
                f"{report.seconds:,.1f} s in the daemon{extra}"
            )
        else:
            print(f"{label} did not finish cleanly: {report!r}")
    errors = [e for c in single_clients + idle_clients + busy_clients for e in c.errors]
    for text, n in Counter(errors).most_common(5):
        print(f"error x{n}: {text}")
    if not local:
        print("(embedder none: hybrid requests fall back to keyword search with a warning; 'warned' counts them)")


# ---- main ----


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "part", choices=("latency", "search", "no-model", "backlog", "cli-vs-rg", "startup", "rss", "http", "concurrent", "all")
    )
    parser.add_argument("--notes", type=int, default=10_000, help="notes in the keyword-only vault (default 10,000)")
    parser.add_argument("--model-notes", type=int, default=1_000, help="notes in the vault indexed with the local model (default 1,000)")
    parser.add_argument("--runs", type=int, help="latency: saves per embedder (default 50); cli-vs-rg, startup: timed runs (default 30)")
    parser.add_argument(
        "--embedder",
        choices=("none", "local", "both"),
        help="latency: both (default); concurrent: none (default) or local; http: local (default) or none",
    )
    parser.add_argument("--compare-tree", help="http: also measure tarsd (listener off) from this source tree, e.g. a git archive of main")
    parser.add_argument("--words", nargs="+", help="cli-vs-rg: words to search (default: a common, medium, rare and absent word)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent: searching clients (default 20)")
    parser.add_argument(
        "--idle-seconds", type=float, default=5.0, help="concurrent: seconds of searching without indexing first (default 5)"
    )
    parser.add_argument("--no-baseline", dest="baseline", action="store_false", help="concurrent: skip the re-index without clients")
    parser.add_argument("--debounce-ms", type=int, default=200, help="TARS_DAEMON_DEBOUNCE_MS for the daemons (default 200, the daemon's)")
    parser.add_argument("--poll-timeout", type=float, default=60.0, help="latency: seconds to wait for one save to become searchable")
    parser.add_argument("--ready-timeout", type=float, default=3600.0, help="seconds to wait for a daemon's index (default 3600)")
    parser.add_argument("--settle", type=float, default=5.0, help="rss: idle seconds before sampling (default 5)")
    parser.add_argument(
        "--timer", choices=("auto", "hyperfine", "python"), default="auto", help="whole-process timings (default: hyperfine if installed)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary vaults, databases and daemon logs")
    args = parser.parse_args()
    if args.part == "all" and args.embedder == "both":
        parser.error("--embedder both is for latency")

    latency_runs, timing_runs = args.runs or 50, args.runs or 30
    session = Session(args)
    log(f"daemon bench: {args.part}; work dir {session.tmp}; {load()}")
    everything = args.part == "all"
    try:
        if args.part == "latency" or everything:
            embedders = ("none", "local") if everything or args.embedder in (None, "both") else (args.embedder,)
            if "none" in embedders:
                run_latency(session, "none", latency_runs)
            if "local" in embedders and not everything:  # all: after rss, on the same model daemon
                session.stop("none", args.notes)
                run_latency(session, "local", latency_runs)
        if args.part == "search" or everything:
            run_search(session, timing_runs * 2)
        if args.part == "no-model" or everything:
            run_no_model(session, timing_runs * 2)
        if args.part == "backlog":  # not in all: it embeds the whole --notes vault
            run_backlog(session, latency_runs)
        if args.part == "cli-vs-rg" or everything:
            run_cli_vs_rg(session, timing_runs)
        if args.part == "startup" or everything:
            run_startup(session, timing_runs)
        if args.part == "concurrent" or everything:
            args.embedder = args.embedder if args.embedder in ("none", "local") else "none"
            run_concurrent(session)
        if everything:
            session.stop("none", args.notes)  # two cores: leave them to the model daemon
        if args.part == "rss" or everything:
            run_rss(session)
        if args.part == "http":
            run_http(session)
        if everything:
            run_latency(session, "local", latency_runs)
    finally:
        session.close()


if __name__ == "__main__":
    main()
