"""Search latency per mode, in-process, on a vault indexed with the local model.

Indexing 10,000 notes with vectors takes a long time on a 2-core box: --keep-db keeps the index
for later runs (the vault is rebuilt identically, so the next sync only re-hashes the notes).
Every query is timed with an empty query-vector cache, so vec and hybrid include embedding it.

    python bench/search_latency.py [--notes N] [--queries N] [--keep-db PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import Progress, build_vault, log, met, open_engine, percentile, print_table, scifact_queries

from tarsd.search.recall import recall

MODES = ("fts", "vec", "hybrid")
WARMUP = 5
HYBRID_OVER_EMBEDDING_MS = 10.0  # hybrid p50 may cost the query's embedding plus this
VEC_SEARCH_P50_MS = 3.0  # a vector search once the query's vector is known


def timings_ms(fn, items) -> list[float]:
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000, help="notes in the vault (default 10,000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode (default 200)")
    parser.add_argument("--keep-db", type=Path, help="index database to create or reuse (default: a temporary one)")
    args = parser.parse_args()

    texts = list(dict.fromkeys(scifact_queries().values()))  # distinct, in file order
    warmup, queries = texts[:WARMUP], texts[WARMUP : WARMUP + args.queries]

    with tempfile.TemporaryDirectory(prefix="tars-bench-") as tmp:
        vault = Path(tmp) / "vault"
        notes = build_vault(vault, args.notes)
        engine = open_engine(vault, args.keep_db or Path(tmp) / "index.sqlite3")
        try:
            report = engine.indexer.sync(progress=Progress("index"))
            counts = engine.store.counts()
            log(f"synced in {report.seconds:,.1f} s: {counts['files']:,} notes, {counts['chunks']:,} chunks, {counts['vectors']:,} vectors")
            if report.embedder_error or counts["pending_vectors"]:
                sys.exit(f"the index has no vectors for every chunk: {report.embedder_error or 'pending vectors left'}")

            searcher = engine.searcher

            def search(mode: str):
                def run(query: str) -> None:
                    searcher._query_vectors.clear()  # time the query embedding too
                    searcher.search(query, mode=mode, limit=10)

                return run

            for query in warmup:
                search("hybrid")(query)
            results = {mode: timings_ms(search(mode), queries) for mode in MODES}
            results["query embedding only"] = timings_ms(lambda q: engine.embedder.embed([q]), queries)

            def recalled(query: str) -> None:
                searcher._query_vectors.clear()
                recall(searcher, query, "hybrid")  # what the chat's opening context and memory_search run

            results["recall, hybrid, 4,400 characters"] = timings_ms(recalled, queries)

            def cached_vec(query: str) -> None:
                searcher.search(query, mode="vec", limit=10)

            for query in queries:  # the query vectors into the cache: what is left is the search itself
                cached_vec(query)
            results["vec, query vector cached (the search alone)"] = timings_ms(cached_vec, queries)
        finally:
            engine.close()

    embed_p50 = percentile(results["query embedding only"], 50)
    targets = {
        "hybrid": (embed_p50 + HYBRID_OVER_EMBEDDING_MS, f"p50 <= embedding + {HYBRID_OVER_EMBEDDING_MS:g} ms"),
        "vec, query vector cached (the search alone)": (VEC_SEARCH_P50_MS, f"p50 <= {VEC_SEARCH_P50_MS:g} ms"),
    }
    rows = []
    for name, times in results.items():
        p50, p99 = percentile(times, 50), percentile(times, 99)
        limit, label = targets.get(name, (None, ""))
        rows.append([name, len(times), f"{p50:.2f}", f"{p99:.2f}", label, "" if limit is None else met(p50 <= limit)])
    print_table(
        ["mode", "queries", "p50 ms", "p99 ms", "target", "met"],
        rows,
        f"Search latency, limit 10, one result per file: {notes:,}-note vault ({counts['chunks']:,} chunks with vectors)",
    )


if __name__ == "__main__":
    main()
