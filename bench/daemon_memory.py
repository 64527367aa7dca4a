"""tarsd inside a memory budget, and what each low-memory setting saves.

``budget``: a real tarsd in a memory cgroup (tests/harness/cgroup.py) at 512 MB (a Pi Zero 2 W or
Pi 3) and 1 GB, on the 10,000-note vault (bench/common.py build_vault), from an empty index and an
empty model cache: the cold keyword index, then the whole embedding backlog, with a search every
--search-every seconds all along. tarsd runs with its defaults, so the figures show what it picks
from the limit (--set TARS_X=VALUE changes a setting: TARS_DAEMON_MEMORY_MB=100000 runs the usual
settings under the same limit, for comparison).

``levers``: each setting the budget picks, measured on its own (tarsd/config/budget.py says which):
tarsd's usual settings against its low-memory ones (a cold keyword index of --notes notes without
the model; the cold index and the first 1,500 vectors of 1,000 notes with it, searched meanwhile),
and the bare model as tarsd runs it (tarsd/embed/onnx_model.py) at 1 and 4 onnxruntime threads and
batch sizes 1 and 8.

    sudo .venv/bin/python bench/daemon_memory.py budget [--notes 10000] [--limits 512 1024] [--set TARS_X=V]
    sudo .venv/bin/python bench/daemon_memory.py levers [--notes 10000]

Peak RSS is that of tarsd and its children (the chunking workers, the one-off model fold), summed
every STATUS_POLL_SECONDS; the cgroup's own peak also counts page cache, which the kernel reclaims
before it kills. Needs root (or a delegated cgroup), as the harness says when it cannot make one.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import MODEL_DIR, build_vault, log, met, percentile, print_table, scifact_corpus, scifact_queries  # noqa: E402

from harness.cgroup import CgroupUnavailable, MemoryCgroup  # noqa: E402
from tarsctl.client import Client  # noqa: E402
from tarsctl.protocol import Ping, Search, Status  # noqa: E402

MB = 1024 * 1024
# ---- targets ----
OOM_KILLS = 0
# Room left under the limit at the peak: for a Pi's other processes and a bigger vault.
HEADROOM = 0.20
# ---- bounds ----
STATUS_POLL_SECONDS = 0.5
START_DEADLINE_SECONDS = 120.0
RUN_DEADLINE_SECONDS = 4 * 3600.0  # the backlog of 10,000 notes took about 20 minutes here
UNLIMITED_MB = 16 * 1024  # the levers' runs: a cgroup only to find tarsd's children
USUAL = {"TARS_DAEMON_MEMORY_MB": "100000"}
LOW = {"TARS_DAEMON_MEMORY_MB": "512"}


@dataclass
class Run:
    limit_mb: int
    peak_rss: int = 0
    cgroup_peak: int = 0
    oom_kills: int = 0
    keyword_seconds: float | None = None
    backlog_seconds: float | None = None
    stopped_seconds: float | None = None  # when the run reached what it waited for
    vectors: int = 0
    chunks: int = 0
    idle_rss: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"fts": [], "hybrid": []})
    errors: list[str] = field(default_factory=list)
    picked: str = ""  # the "memory budget" line tarsd logged


def run_tarsd(
    vault: Path,
    notes: int,
    limit_mb: int,
    work: Path,
    settings: dict[str, str],
    until: str = "backlog",
    vectors_wanted: int = 0,
    search_every: float = 0.0,
) -> Run:
    """tarsd on vault from an empty index inside a limit_mb cgroup, until "keywords" (the cold
    keyword index is done), "vectors" (vectors_wanted passages have vectors) or "backlog" (all do)."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    (state / "config.toml").write_text("")
    socket = Path(tempfile.mkdtemp(prefix="tm-", dir="/tmp")) / "tarsd.sock"  # socket paths must stay short
    env = {k: v for k, v in os.environ.items() if not k.startswith("TARS_")}
    env.update(
        TARS_CONFIG=str(state / "config.toml"),
        TARS_SOCKET=str(socket),
        TARS_DB=str(state / "index.sqlite3"),
        TARS_MODEL_DIR=str(MODEL_DIR),
        # The folded model is made once per cache: a fresh cache, so the fold runs inside the limit too.
        XDG_CACHE_HOME=str(state / "cache"),
        **settings,
    )
    cgroup = MemoryCgroup.create(f"tars-bench-{limit_mb}", limit_mb * MB)
    log_path = state / "tarsd.log"
    queries = list(scifact_queries().values())
    run = Run(limit_mb)
    label = f"{limit_mb:,} MB" if limit_mb < UNLIMITED_MB else " ".join(f"{k}={v}" for k, v in settings.items())
    started = time.perf_counter()
    with open(log_path, "ab") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tarsd.daemon.main", "--vault", str(vault)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=cgroup.enter,
        )
    client = None
    try:
        while client is None:
            if process.poll() is not None or time.perf_counter() - started > START_DEADLINE_SECONDS:
                raise RuntimeError(f"tarsd did not answer [{label}]:\n{log_path.read_text(errors='replace')[-3000:]}")
            try:
                client = Client(socket, timeout=120).__enter__()
                client.call(Ping(id=client.next_id()))
            except Exception:  # not listening yet
                client = None
                time.sleep(0.1)
        last_search = last_report = 0.0
        while True:
            t = time.perf_counter() - started
            run.peak_rss = max(run.peak_rss, cgroup.rss_bytes())
            if process.poll() is not None:
                run.errors.append(f"tarsd exited with {process.returncode} after {t:,.0f} s (OOM kills: {cgroup.oom_kills()})")
                break
            try:
                reply = client.call(Status(id=client.next_id()))
            except Exception as exc:  # tarsd gone (killed?): the next round records how it ended
                if process.poll() is None:
                    run.errors.append(f"status failed: {exc}")
                    break
                continue
            counts = reply.counts
            run.chunks, run.vectors = counts.get("chunks", 0), counts.get("chunks", 0) - counts.get("pending_vectors", 0)
            if run.keyword_seconds is None and reply.coverage.reconciled and counts.get("files", 0) >= notes and reply.queue_depth == 0:
                run.keyword_seconds = t
                log(f"[{label}] keywords: {counts['files']:,} notes, {run.chunks:,} passages after {t:,.0f} s")
                if until == "keywords":
                    run.stopped_seconds = t
                    break
            if run.keyword_seconds is not None and until == "vectors" and run.vectors >= vectors_wanted:
                run.stopped_seconds = t
                break
            if run.keyword_seconds is not None and counts.get("pending_vectors", 1) == 0 and not reply.indexing:
                run.backlog_seconds = run.stopped_seconds = t
                break
            if search_every and t - last_search >= search_every:
                last_search = t
                search(client, run, queries, counts.get("chunks", 0))
            if t - last_report >= 60:
                last_report = t
                log(
                    f"[{label}] {t:,.0f} s: {counts.get('files', 0):,} notes, {run.chunks:,} passages, {run.vectors:,} with vectors; "
                    f"RSS {cgroup.rss_bytes() / MB:,.0f} MB (peak {run.peak_rss / MB:,.0f})"
                )
            if t > RUN_DEADLINE_SECONDS:
                run.errors.append(f"not done after {RUN_DEADLINE_SECONDS:,.0f} s")
                break
            time.sleep(STATUS_POLL_SECONDS)
        if until == "backlog" and process.poll() is None and not run.errors:
            time.sleep(5)  # idle: the heap is handed back after a burst of work
            run.idle_rss = cgroup.rss_bytes()
            for _ in range(20):
                search(client, run, queries, run.chunks, mode="hybrid")
            run.peak_rss = max(run.peak_rss, cgroup.rss_bytes())
    finally:
        if client is not None:
            client.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        run.cgroup_peak, run.oom_kills = cgroup.peak_bytes(), cgroup.oom_kills()
        cgroup.remove()
        said = [line for line in log_path.read_text(errors="replace").splitlines() if "memory budget" in line]
        run.picked = said[0].split("memory budget ", 1)[-1] if said else ""
    return run


def search(client: Client, run: Run, queries: list[str], chunks: int, mode: str = "") -> None:
    asked = len(run.latencies["fts"]) + len(run.latencies["hybrid"])
    mode = mode or ("fts" if len(run.latencies["fts"]) <= len(run.latencies["hybrid"]) else "hybrid")
    query = queries[asked % len(queries)]
    started = time.perf_counter()
    try:
        hits = client.call(Search(id=client.next_id(), query=query, mode=mode, limit=10))
    except Exception as exc:  # any failure to answer is what this counts
        run.errors.append(f"{mode} search failed: {exc}")
        return
    run.latencies[mode].append((time.perf_counter() - started) * 1000)
    if not hits.results and chunks > 0:
        run.errors.append(f"{mode} search for {query!r} found nothing")


# ---- budget ----


def budget(args: argparse.Namespace, work: Path, vault: Path) -> None:
    settings = dict(item.split("=", 1) for item in args.set)
    runs = []
    for limit in args.limits:
        log(f"[{limit:,} MB] tarsd from an empty index, inside a {limit:,} MB memory cgroup")
        runs.append(run_tarsd(vault, args.notes, limit, work, settings, "backlog", search_every=args.search_every))
    rows = []
    for r in runs:
        limit = f"{r.limit_mb:,} MB"
        answered = len(r.latencies["fts"]) + len(r.latencies["hybrid"])
        room = r.limit_mb * MB * (1 - HEADROOM)
        rows += [
            [limit, "cold keyword index, s", seconds(r.keyword_seconds), "", ""],
            [
                limit,
                f"embedding backlog done, s after start ({r.chunks:,} passages)",
                seconds(r.backlog_seconds),
                "done",
                met(not r.errors),
            ],
            [limit, "OOM kills", r.oom_kills, f"{OOM_KILLS}", met(r.oom_kills == OOM_KILLS)],
            [limit, "peak RSS, tarsd and its children, MB", f"{r.peak_rss / MB:,.0f}", f"<= {room / MB:,.0f}", met(r.peak_rss <= room)],
            [limit, "cgroup peak, page cache included, MB", f"{r.cgroup_peak / MB:,.0f}", "", ""],
            [limit, "RSS idle after the backlog, MB", f"{r.idle_rss / MB:,.0f}", "", ""],
            [limit, "searches answered / failed", f"{answered} / {len(r.errors)}", "0 failed", met(not r.errors)],
            [limit, "search p50 fts / hybrid, ms", f"{ms(r.latencies['fts'])} / {ms(r.latencies['hybrid'])}", "", ""],
        ]
    print_table(
        ["limit", "what", "figure", "target", "met"],
        rows,
        f"tarsd in a memory cgroup, {args.notes:,} notes from an empty index; settings: {' '.join(args.set) or 'the defaults'} "
        f"({os.cpu_count()} cores, Python {sys.version.split()[0]}, {load()})",
    )
    for r in runs:
        print(f"{r.limit_mb:,} MB: tarsd's memory budget: {r.picked}")
        for error in r.errors[:10]:
            print(f"{r.limit_mb:,} MB: {error}")


# ---- levers ----

# Runs in a child: the model as tarsd runs it, embedding passages; prints its peak RSS in MB.
_BARE_MODEL = """
import sys, json
from pathlib import Path
from tarsd.embed.folding import folded_model
from tarsd.embed.onnx_model import OnnxEncoder
model, cache, threads, batch = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
texts = json.loads(sys.stdin.read())
encoder = OnnxEncoder(folded_model(model / "model.onnx", cache), model / "tokenizer.json", 256, "mean", threads)
import time
started = time.perf_counter()
for start in range(0, len(texts), 8):  # as tarsd's rounds of 8 passages
    encoder.encode(texts[start : start + 8], batch)
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(peak, time.perf_counter() - started)
"""


def levers(args: argparse.Namespace, work: Path, vault: Path) -> None:
    rows = []
    for name, settings in (("usual", USUAL), ("low-memory", LOW)):
        log(f"[{name}] cold keyword index of {args.notes:,} notes, no model")
        r = run_tarsd(vault, args.notes, UNLIMITED_MB, work, {**settings, "TARS_EMBEDDER": "none"}, "keywords")
        rows.append(
            [
                f"{name} settings",
                f"{args.notes:,} notes, no model: cold keyword index",
                f"{r.peak_rss / MB:,.0f}",
                seconds(r.stopped_seconds),
            ]
        )
    small = work / "vault-1000"
    build_vault(small, 1000)
    for name, settings in (("usual", USUAL), ("low-memory", LOW)):
        log(f"[{name}] 1,000 notes with the model: cold index and the first 1,500 vectors, a search every 5 s")
        r = run_tarsd(small, 1000, UNLIMITED_MB, work, settings, "vectors", vectors_wanted=1500, search_every=5.0)
        rows.append(
            [
                f"{name} settings",
                "1,000 notes with the model: cold index, first 1,500 vectors, searches",
                f"{r.peak_rss / MB:,.0f}",
                seconds(r.stopped_seconds),
            ]
        )
    texts = [d["text"] for d in scifact_corpus()[:200]]
    cache = work / "folded"
    for threads, batch in ((1, 1), (4, 1), (1, 8)):
        log(f"the bare model, {threads} thread(s), batch {batch}: {len(texts)} passages")
        done = subprocess.run(
            [sys.executable, "-c", _BARE_MODEL, str(MODEL_DIR), str(cache), str(threads), str(batch)],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            rows.append([f"threads {threads}, batch {batch}", f"the bare model failed: {done.stderr.strip()[-200:]}", "-", "-"])
            continue
        peak, took = (float(value) for value in done.stdout.split())
        rows.append([f"threads {threads}, batch {batch}", f"the bare model, {len(texts)} passages", f"{peak:,.0f}", f"{took:,.0f}"])
    print_table(
        ["settings", "what", "peak RSS, MB", "took, s"],
        rows,
        f"What each low-memory setting saves ({os.cpu_count()} cores, Python {sys.version.split()[0]}, {load()})",
    )


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def ms(values: list[float]) -> str:
    return f"{percentile(values, 50):,.0f}" if values else "-"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["budget", "levers"])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--limits", type=int, nargs="+", default=[512, 1024], help="budget: memory limits in MB")
    parser.add_argument("--search-every", type=float, default=10.0, help="budget: seconds between searches")
    parser.add_argument("--set", action="append", default=[], metavar="TARS_X=VALUE", help="budget: a setting for tarsd")
    args = parser.parse_args()
    # A stop (a CI time limit, kill) ends tarsd and removes the cgroups, as the finally blocks say.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.notes < 1 or any(limit < 64 for limit in args.limits):
        parser.error("--notes must be at least 1 and every limit at least 64 MB")
    if not all(item.startswith("TARS_") and "=" in item for item in args.set):
        parser.error("--set takes TARS_NAME=VALUE, e.g. --set TARS_DAEMON_MEMORY_MB=100000")
    try:
        MemoryCgroup.create("tars-bench-probe", 64 * MB).remove()
    except CgroupUnavailable as exc:
        sys.exit(f"cannot run tarsd in a memory cgroup here: {exc}")
    with tempfile.TemporaryDirectory(prefix="tars-memory-") as tmp:
        work = Path(tmp)
        vault = work / "vault"
        log(f"building a {args.notes:,}-note vault in {vault}")
        build_vault(vault, args.notes)
        (budget if args.what == "budget" else levers)(args, work, vault)


if __name__ == "__main__":
    main()
