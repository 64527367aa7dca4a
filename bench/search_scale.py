"""Scale: the keyword side of tars at 100,000 notes (or --notes N), with real text.

Builds the vault (bench/common.py's build_vault: SciFact abstracts and Dendron notes, then
notes joining two abstracts), cold-indexes it without an embedder, times no-op re-syncs and
keyword searches in process, reports the database size per 1,000 notes, then starts a real
tarsd (embedder none) on the same vault and database and samples its idle RSS.

The local model embeds about 26 passages/s on this 2-core box, so real vectors for the ~330,000
passages of 100,000 notes would take 3.5 hours. ``--stand-in-vectors N`` measures the vector side
anyway, for time and memory only: the vault is indexed again with the model's chunking, N
passages are embedded for real, and every other passage gets one of those N vectors (same count,
same dimensions, real model output: the matrix scan, the hybrid search and tarsd's memory are
what they would be; which passages rank first is not, so no quality is measured).

    python bench/search_scale.py [--notes N] [--queries N]                  # 100,000 notes: ~5 min here
    python bench/search_scale.py --stand-in-vectors 1000                    # + the vector side: ~15 min
    python bench/search_scale.py --stand-in-vectors 1000 --rss-runs 3       # tarsd's RSS in 3 runs: +2 min each

tarsd's RSS after the searches moves from one start to the next with the same steps (how much
freed memory its allocators keep depends on which thread ran what when): ``--rss-runs N``
starts it N times on the same database and prints the least and the most.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import build_vault, log, met, open_engine, percentile, print_table, scifact_queries
from daemon_latency import Daemon, idle_rss, load

from tarsctl.protocol import Search
from tarsd.index.indexer import EMBED_ROUND

COLD_NOTES_PER_SECOND = 2000.0
NOOP_SECONDS = 3.0
IDLE_RSS_MB = 400.0
NOOP_RUNS = 3
IDLE_SETTLE_SECONDS = 5.0  # the first reconcile's garbage settles before the idle figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=100_000, help="notes in the vault (default 100,000)")
    parser.add_argument("--queries", type=int, default=200, help="keyword searches timed (default 200)")
    parser.add_argument("--stand-in-vectors", type=int, default=0, help="also the vector side, with N real vectors reused (see above)")
    parser.add_argument("--rss-runs", type=int, default=1, help="start tarsd this many times for the vector side's RSS (default 1)")
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
            rss, _ = idle_rss(daemon, need_vectors=False, settle=IDLE_SETTLE_SECONDS)
        finally:
            daemon.cleanup()

        vector_rows = vector_side(vault, Path(tmp), args.stand_in_vectors, args.queries, args.rss_runs) if args.stand_in_vectors else []

    rate = cold.indexed / cold.seconds
    print_table(
        ["measure", "value", "target", "met"],
        [
            ["cold keyword index, no embedder", f"{rate:,.0f} notes/s ({cold.seconds:,.1f} s)", ">= 2,000 notes/s", met(rate >= 2000)],
            [f"no-op re-sync (median of {NOOP_RUNS})", f"{noop:,.2f} s", f"<= {NOOP_SECONDS:g} s", met(noop <= NOOP_SECONDS)],
            [f"fts search p50 / p99 ({len(times)} queries)", f"{percentile(times, 50):.1f} / {percentile(times, 99):.1f} ms", "", ""],
            ["database size", f"{db_mb:,.0f} MB ({db_mb / notes * 1000:.2f} MB per 1,000 notes)", "report", ""],
            ["tarsd idle RSS, embedder none", f"{rss:,.0f} MB", f"<= {IDLE_RSS_MB:g} MB", met(rss <= IDLE_RSS_MB)],
            *vector_rows,
        ],
        f"Scale, keyword side: {notes:,}-note vault, {chunks:,} chunks; {load()}",
    )


def vector_side(vault: Path, tmp: Path, real: int, queries: int, rss_runs: int) -> list[list[object]]:
    """Rows for the vector side with stand-in vectors (see the module's docstring)."""
    state = tmp / "state-vectors"
    state.mkdir()
    db = state / "index.sqlite3"
    engine = open_engine(vault, db, "local")
    try:
        engine.indexer.sync(embed=False)
        embedded = engine.indexer.embed_pending(rounds=max(1, real // EMBED_ROUND))  # real vectors, the model's own
        fingerprint = engine.embedder.fingerprint
        pool = [row[0] for row in engine.store.conn.execute("SELECT vector FROM embedding_cache WHERE fingerprint = ?", (fingerprint,))]
        started, filled = time.perf_counter(), 0
        for batch in engine.store.pending_batches(5_000):
            filled += engine.store.store_vectors(fingerprint, {h: pool[(filled + i) % len(pool)] for i, (h, _) in enumerate(batch)})
        log(f"{embedded:,} passages embedded, {filled:,} given one of their vectors in {time.perf_counter() - started:.0f} s")
        counts = engine.store.counts()
        texts = list(dict.fromkeys(scifact_queries().values()))[5 : 5 + queries]
        searcher = engine.searcher
        for text in texts[:5]:
            searcher.search(text, mode="hybrid", limit=10)
        times: dict[str, list[float]] = {"hybrid": [], "vec, vector known": [], "embedding": []}
        for text in texts:
            searcher._query_vectors.clear()  # the query's embedding is part of a search
            started = time.perf_counter()
            searcher.search(text, mode="hybrid", limit=10)
            times["hybrid"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            searcher.search(text, mode="vec", limit=10)  # its vector is cached now
            times["vec, vector known"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            engine.embedder.embed([text])
            times["embedding"].append((time.perf_counter() - started) * 1000)
    finally:
        engine.close()
    idle, searched = [], []
    for run in range(max(1, rss_runs)):
        rss, after = daemon_rss(vault, counts["files"], state, texts[:10])
        log(f"tarsd run {run + 1}: {rss:,.0f} MB idle, {after:,.0f} MB after 10 hybrid searches")
        idle.append(rss)
        searched.append(after)
    runs = f" ({len(searched)} runs)" if len(searched) > 1 else ""
    hybrid = percentile(times["hybrid"], 50)
    return [
        ["passages with (stand-in) vectors", f"{counts['vectors']:,} ({embedded:,} embedded for real)", "", ""],
        [
            "hybrid p50 / p99, query embedding included",
            f"{hybrid:.1f} / {percentile(times['hybrid'], 99):.1f} ms",
            "<= 60 ms",
            met(hybrid <= 60),
        ],
        ["vec p50, the query's vector known", f"{percentile(times['vec, vector known'], 50):.1f} ms", "", ""],
        ["the query's embedding p50", f"{percentile(times['embedding'], 50):.1f} ms", "", ""],
        ["tarsd idle RSS, model loaded, before the first search" + runs, spread(idle), "", ""],
        [
            "tarsd RSS after 10 hybrid searches (every vector in memory)" + runs,
            spread(searched),
            f"<= {IDLE_RSS_MB:g} MB",
            met(max(searched) <= IDLE_RSS_MB),
        ],
    ]


def daemon_rss(vault: Path, notes: int, state: Path, texts: list[str]) -> tuple[float, float]:
    """tarsd started on the vault's database: (idle RSS before the first search, RSS after
    ``texts`` as hybrid searches), in MB."""
    daemon = Daemon(vault, notes, "local", 200, state)
    try:
        daemon.start(deadline_seconds=300)
        daemon.wait_ready(notes, need_vectors=True, deadline_seconds=900)
        rss, _ = idle_rss(daemon, need_vectors=True, settle=IDLE_SETTLE_SECONDS)
        with daemon.client(timeout=300) as client:  # the matrix is read on the first vector search
            for text in texts:
                client.call(Search(id=client.next_id(), query=text, mode="hybrid", limit=10))
        time.sleep(5.0)
        return rss, daemon.memory()["VmRSS"]
    finally:
        daemon.cleanup()


def spread(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f} MB" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f} MB"


if __name__ == "__main__":
    main()
