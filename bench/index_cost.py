"""Indexing cost: cold index, no-op re-sync, one-note edit, model throughput, peak memory.

(a)-(c) run on the whole vault without an embedder (keyword index only). (d) cold-indexes with
the local model in a child process, by default on a 1,000-note sample of the vault because the
model does about 20 chunks/s on a 2-core box; the child then embeds a sample of the same chunk
texts directly to compare the pipeline with the bare model, and (e) reports its peak RSS.

    python bench/index_cost.py [--notes N] [--model-notes N (0: all)] [--sample N] [--edits N]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Progress, build_vault, log, met, open_engine, peak_rss_mb, print_table, proc_status_mb

from tarsd.markdown.chunker import embedding_input

BATCH_SIZES = (1, 4, 16)
# The first embedding of a vault, chunks/s: 1.5x the 28.6 of the release before (2 idle cores).
FIRST_EMBEDDING_CHUNKS_PER_SECOND = 1.5 * 28.6
NOOP_RUNS = 5


def copy_sample(src: Path, dest: Path, n: int) -> None:
    """Copy a deterministic sample of n notes of src into dest, keeping relative paths."""
    files = sorted(src.rglob("*.md"))
    for path in random.Random(0).sample(files, n):
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


def model_child(vault: Path, db: Path, sample_size: int) -> None:
    """Runs in a fresh process: cold index with the local model, then the bare model's
    throughput on a sample of the same chunk texts. Prints one JSON line."""
    engine = open_engine(vault, db, "local")
    load_seconds, ready = timed(engine.embedder.wait_ready, 600)
    if not ready:
        sys.exit(f"the local model is unavailable: {engine.embedder.error}")
    progress = Progress("model index")
    report = engine.indexer.sync(progress=progress)
    peak, hwm = peak_rss_mb(), proc_status_mb("VmHWM")
    if report.embedder_error or report.pending_vectors:
        sys.exit(f"indexing with the model left {report.pending_vectors} chunks pending: {report.embedder_error}")

    texts = [
        embedding_input(context, text)
        for context, text in engine.store.conn.execute("SELECT embed_context, text FROM chunks GROUP BY content_hash ORDER BY min(id)")
    ]
    sample = random.Random(0).sample(texts, min(sample_size, len(texts)))
    configured = engine.config.embedder.batch_size
    rates = {}
    for batch in sorted({*BATCH_SIZES, configured}):
        engine.embedder.config.batch_size = batch
        seconds, _ = timed(engine.embedder.embed, sample)
        rates[batch] = len(sample) / seconds
        log(f"[model] batch {batch}: {rates[batch]:.1f} chunks/s")
    engine.close()
    scan = progress.finished.get("scan", 0.0)
    print(
        json.dumps(
            {
                "notes": report.indexed,
                "chunks": report.chunks,
                "embedded": report.vectors_embedded,
                "seconds": report.seconds,
                "embed_seconds": report.seconds - scan,
                "load_seconds": load_seconds,
                "peak_rss_mb": peak,
                "vm_hwm_mb": hwm,
                "sample": len(sample),
                "configured_batch": configured,
                "rates": rates,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000, help="notes in the vault (default 10,000)")
    parser.add_argument(
        "--model-notes", type=int, default=1_000, help="notes cold-indexed with the model; 0 means the whole vault (default 1,000)"
    )
    parser.add_argument("--sample", type=int, default=500, help="chunk texts embedded directly to measure the bare model (default 500)")
    parser.add_argument("--edits", type=int, default=20, help="single-note edits timed (default 20)")
    parser.add_argument("--model-child", nargs=2, type=Path, help=argparse.SUPPRESS)  # VAULT DB: the child process of (d)
    args = parser.parse_args()
    if args.model_child:
        model_child(*args.model_child, args.sample)
        return

    with tempfile.TemporaryDirectory(prefix="tars-bench-") as tmp:
        vault = Path(tmp) / "vault"
        notes = build_vault(vault, args.notes)
        model_notes = args.model_notes if 0 < args.model_notes < notes else notes
        model_vault = vault
        if model_notes < notes:
            model_vault = Path(tmp) / "model-vault"
            copy_sample(vault, model_vault, model_notes)

        engine = open_engine(vault, Path(tmp) / "fts.sqlite3", "none")
        try:
            cold = engine.indexer.sync()  # (a)
            log(f"(a) cold keyword index: {cold.indexed:,} notes, {cold.chunks:,} chunks in {cold.seconds:.2f} s")
            noop = statistics.median(timed(engine.indexer.sync)[0] for _ in range(NOOP_RUNS))  # (b)
            edits = []  # (c)
            files = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
            for i, rel in enumerate(random.Random(1).sample(files, args.edits)):
                with open(vault / rel, "a", encoding="utf-8") as handle:
                    handle.write(f"\nEdited line {i}.\n")
                seconds, report = timed(engine.indexer.sync, paths=[rel], embed=False)
                assert report.indexed == 1, f"the edit of {rel} was not re-indexed: {report}"
                edits.append(seconds)
        finally:
            engine.close()

        # The child's ru_maxrss starts from this process's RSS at the fork: keep this one small.
        log(f"(d) cold index with the model of {model_notes:,} notes in a child process (parent RSS {proc_status_mb():.0f} MB)")
        child = subprocess.run(
            [sys.executable, __file__, "--model-child", str(model_vault), str(Path(tmp) / "model.sqlite3"), "--sample", str(args.sample)],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        model = json.loads(child.stdout.strip().splitlines()[-1])

    rates = {int(k): v for k, v in model["rates"].items()}
    bare = rates[model["configured_batch"]]
    pipeline = model["embedded"] / model["seconds"]
    ratio = pipeline / bare
    which = "all" if model_notes == notes else "a sample"
    print_table(
        ["measure", "value", "target", "met"],
        [
            [
                "(a) cold index, no embedder",
                f"{cold.indexed / cold.seconds:,.0f} notes/s",
                ">= 2,000 notes/s",
                met(cold.indexed / cold.seconds >= 2000),
            ],
            [f"(b) no-op re-sync (median of {NOOP_RUNS})", f"{noop * 1000:,.1f} ms", "<= 500 ms", met(noop <= 0.5)],
            [
                f"(c) one edited note (median of {len(edits)})",
                f"{statistics.median(edits) * 1000:,.1f} ms",
                "<= 50 ms",
                met(statistics.median(edits) <= 0.05),
            ],
            ["(d) cold index, local model", f"{model['notes'] / model['seconds']:,.1f} notes/s", "", ""],
            [
                "(d) cold index, local model",
                f"{pipeline:,.1f} chunks/s",
                f">= {FIRST_EMBEDDING_CHUNKS_PER_SECOND:.1f} chunks/s",
                met(pipeline >= FIRST_EMBEDDING_CHUNKS_PER_SECOND),
            ],
            ["(d) embedding phase only", f"{model['embedded'] / model['embed_seconds']:,.1f} chunks/s", "", ""],
            [f"(d) bare model, batch {model['configured_batch']}", f"{bare:,.1f} chunks/s", "", ""],
            ["(d) pipeline / bare model", f"{ratio:.2f}", ">= 0.90", met(ratio >= 0.9)],
            [
                "(e) peak RSS, model cold index",
                f"{model['peak_rss_mb']:,.0f} MB (VmHWM {model['vm_hwm_mb']:,.0f})",
                "<= 500 MB",
                met(model["peak_rss_mb"] <= 500),
            ],
        ],
        f"Index cost: {notes:,}-note vault ({cold.chunks:,} keyword chunks); (d) and (e) on {which} of it: "
        f"{model['notes']:,} notes, {model['embedded']:,} chunks embedded in {model['seconds']:,.1f} s "
        f"(model load {model['load_seconds']:.1f} s, not counted)",
    )
    print_table(
        ["batch size", "chunks/s", "vs batch 1"],
        [[b, f"{r:,.1f}", f"{r / rates[1]:.2f}"] for b, r in sorted(rates.items())],
        f"Bare model throughput on {model['sample']} of those chunk texts (configured batch size: {model['configured_batch']})",
    )


if __name__ == "__main__":
    main()
