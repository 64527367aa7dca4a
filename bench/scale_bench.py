"""Scale: the keyword side of tars at 100,000 notes (or --notes N), with real text.

Builds the vault (bench/common.py's build_vault: SciFact abstracts and Dendron notes, then
notes joining two abstracts), cold-indexes it without an embedder, times no-op re-syncs and
keyword searches in process, reports the database size per 1,000 notes, then starts a real
tarsd (embedder none) on the same vault and database and samples its idle RSS.

Vectors are not made here: the local model embeds about 20-30 chunks/s on this 2-core box,
so the ~330,000 chunks of 100,000 notes would take three to five hours. The vector side is
measured at 10,000 notes (search_latency.py); the README gives the arithmetic for 100,000.

    python bench/scale_bench.py [--notes N] [--queries N]      # 100,000 notes: about 5 minutes here
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import build_vault, log, met, open_engine, percentile, print_table, scifact_queries
from daemon_bench import Daemon, load

COLD_NOTES_PER_SECOND = 2000.0
NOOP_SECONDS = 3.0
IDLE_RSS_MB = 400.0
NOOP_RUNS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=100_000, help="notes in the vault (default 100,000)")
    parser.add_argument("--queries", type=int, default=200, help="keyword searches timed (default 200)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tars-scale-") as tmp:
        vault, state = Path(tmp) / "vault", Path(tmp) / "state"
        state.mkdir()
        db = state / "index.sqlite3"  # where the daemon below looks for it
        started = time.perf_counter()
        notes = build_vault(vault, args.notes)
        log(f"built a {notes:,}-note vault in {time.perf_counter() - started:.1f} s")

        engine = open_engine(vault, db, "none")
        try:
            cold = engine.indexer.sync()
            log(f"cold keyword index: {cold.indexed:,} notes, {cold.chunks:,} chunks in {cold.seconds:.1f} s")
            noops = []
            for _ in range(NOOP_RUNS):
                started = time.perf_counter()
                engine.indexer.sync()
                noops.append(time.perf_counter() - started)
            noop = statistics.median(noops)
            queries = list(dict.fromkeys(scifact_queries().values()))[: args.queries]
            for query in queries[:5]:
                engine.searcher.search(query, mode="fts", limit=10)
            times = []
            for query in queries:
                started = time.perf_counter()
                engine.searcher.search(query, mode="fts", limit=10)
                times.append((time.perf_counter() - started) * 1000)
            chunks = engine.store.counts()["chunks"]
        finally:
            engine.close()
        db_mb = sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 1e6

        daemon = Daemon(vault, notes, "none", 200, state)
        try:
            daemon.start(deadline_seconds=300)
            daemon.wait_ready(notes, need_vectors=False, deadline_seconds=600)
            samples = []
            for _ in range(5):  # idle: the first reconcile's garbage settled
                time.sleep(2.0)
                samples.append(daemon.memory()["VmRSS"])
            rss = max(samples)
        finally:
            daemon.cleanup()

    rate = cold.indexed / cold.seconds
    print_table(
        ["measure", "value", "target", "met"],
        [
            ["cold keyword index, no embedder", f"{rate:,.0f} notes/s ({cold.seconds:,.1f} s)", ">= 2,000 notes/s", met(rate >= 2000)],
            [f"no-op re-sync (median of {NOOP_RUNS})", f"{noop:,.2f} s", f"<= {NOOP_SECONDS:g} s", met(noop <= NOOP_SECONDS)],
            [f"fts search p50 / p99 ({len(times)} queries)", f"{percentile(times, 50):.1f} / {percentile(times, 99):.1f} ms", "", ""],
            ["database size", f"{db_mb:,.0f} MB ({db_mb / notes * 1000:.2f} MB per 1,000 notes)", "report", ""],
            ["tarsd idle RSS, embedder none", f"{rss:,.0f} MB", f"<= {IDLE_RSS_MB:g} MB", met(rss <= IDLE_RSS_MB)],
        ],
        f"Scale, keyword side: {notes:,}-note vault, {chunks:,} chunks; {load()}",
    )


if __name__ == "__main__":
    main()
