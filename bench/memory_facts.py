"""Memory benchmarks: dedup quality on the labelled fact pairs, and remember latency.

    python bench/memory_facts.py dedup       # precision / recall of "duplicate", with and without the model
    python bench/memory_facts.py remember    # remember p50 / p99 against Memory.md of 100 and 1,000 lines
    python bench/memory_facts.py all

remember runs a real tarsd (the local model, loaded and warm: every line's vector cached)
and times each Remember request from the client: dedup against every line and the write (an
fsynced temp file swapped in); the index commit of Memory.md is queued, not waited for. New
facts are asked without a mode, so the full dedup runs; most are added.

Measured on this project's 2-core box (200 remembers each, half new facts, half close to a line):
model loaded and warm, one at a time: 100 lines p50 10.7 / p99 23.7 ms, 1,000 lines 16.0 / 33.1 ms;
back to back: 20.9 / 45.0 and 37.4 / 73.8 ms; no model: 1,000 lines 6.1 / 20.0 ms.
Dedup on the 88 labelled pairs: precision and recall 1.00 with and without the model.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import MODEL_DIR, log, percentile, print_table  # noqa: E402
from daemon_latency import Daemon  # noqa: E402

from harness.fact_pairs import CHANGED, HARD_RESTATEMENTS, PAIRS  # noqa: E402
from tarsctl.protocol import Remember, Status  # noqa: E402

PEOPLE = "Anna Ben Carla Dara Eoin Fiona Gus Hana Ivan Jane Kofi Lena Mick Nora Oisin Priya Quinn Rosa Sean Tara".split()
PLACES = "Dublin Cork Galway Lisbon Porto Madrid Berlin Leeds Oslo Kyoto Lima Quito Accra Perth Hobart Boston".split()
THINGS = "bicycle piano kayak camera laptop tent guitar telescope drone kettle scooter easel loom lathe".split()
SECTIONS = ["People", "Places", "Things", "Work", "Health", "Food", "Travel", "Hobbies", "Money", "House"]


def fact_line(rng: random.Random, n: int) -> str:
    """A distinct, plausible memory line (numbered, so no two are the same)."""
    person, place, thing = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(THINGS)
    return rng.choice(
        [
            f"{person} lives in {place} since {1990 + n % 35}, flat {n}",
            f"Lent the {thing} to {person} on visit {n}",
            f"{person}'s birthday is on day {n % 28 + 1} of month {n % 12 + 1} (note {n})",
            f"Prefers the {thing} from {place}, bought in order {n}",
            f"Trip {n}: {place} with {person}, by {rng.choice(['train', 'ferry', 'bus', 'plane'])}",
        ]
    )


def new_fact(rng: random.Random) -> str:
    """A fact about something the file never mentions (made-up words), so it is added."""

    def word() -> str:
        return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3))

    return rng.choice(
        [
            f"The {word()} for the {word()} is kept in the {word()}",
            f"Likes {word()} with {word()} on weekends",
            f"Uses {word()} to track the {word()}",
        ]
    )


def memory_file(lines: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    per = max(1, (lines - 2) // len(SECTIONS))
    parts = ["# Core", "- Name: Sam"]
    n = 0
    for section in SECTIONS:
        parts.append(f"# {section}")
        for _ in range(per - 1):
            parts.append(f"- {fact_line(rng, n)}")
            n += 1
    return "\n".join(parts[:lines]) + "\n"


# ---- dedup quality ----


def dedup() -> None:
    from tarsd.config.settings import EmbedderConfig
    from tarsd.embed.embedder import LocalEmbedder
    from tarsd.memory import facts

    embedder = LocalEmbedder(EmbedderConfig(kind="local", model_dir=str(MODEL_DIR)))
    if not embedder.wait_ready(300):
        raise SystemExit(f"the model did not load: {embedder.unavailable_reason()}")
    rows = []
    for name, pairs in (("labelled pairs", PAIRS), ("hard restatements (not in the set)", HARD_RESTATEMENTS)):
        old = embedder.embed([facts.clean(line) for line, _, _ in pairs])
        new = embedder.embed([facts.clean(fact) for _, fact, _ in pairs])
        cosines = [float(a @ b) for a, b in zip(old, new, strict=True)]
        for model, with_cosines in (("loaded", cosines), ("not loaded", [None] * len(pairs))):
            kinds = [facts.compare(facts.features(f), facts.features(o), c).kind for (o, f, _), c in zip(pairs, with_cosines, strict=True)]
            said = [k == facts.DUPLICATE for k in kinds]
            truth = [label == "restatement" for _, _, label in pairs]
            hits = sum(1 for s, t in zip(said, truth, strict=True) if s and t)
            changed = [i for i, (_, _, label) in enumerate(pairs) if label in CHANGED]
            offered = [i for i, (s, t) in enumerate(zip(said, truth, strict=True)) if t and not s and kinds[i] == facts.UPDATE]
            rows.append(
                [
                    name,
                    len(pairs),
                    model,
                    f"{hits / max(1, sum(said)):.2f}" if sum(said) else "n/a",
                    f"{hits / max(1, sum(truth)):.2f}",
                    sum(1 for s, t in zip(said, truth, strict=True) if s and not t),
                    f"{sum(1 for i in changed if kinds[i] == facts.UPDATE)}/{len(changed)}" if changed else "-",
                    f"{len(offered)}/{sum(truth) - hits}" if sum(truth) - hits else "-",
                ]
            )
    print_table(
        ["set", "pairs", "model", "precision", "recall", "false dups", "updates offered", "missed dups offered as updates"],
        rows,
        "dedup: is the new fact a duplicate of the line?",
    )


# ---- remember latency ----


def idle(client, need_vectors: bool) -> None:
    """Until nothing is queued, indexed or embedded (a user's remembers come one at a time)."""
    end = time.monotonic() + 120
    while time.monotonic() < end:
        reply = client.call(Status(id=client.next_id()))
        pending = reply.counts.get("pending_vectors", 0) if need_vectors else 0
        if not reply.indexing and reply.queue_depth == 0 and not pending and not reply.memory.vectors_pending:
            return
        time.sleep(0.02)


def remember_latency(sizes: list[int], requests: int, embedder: str, pace: str) -> list[list[object]]:
    rows = []
    for size in sizes:
        root = Path(tempfile.mkdtemp(prefix="tars-membench-"))
        vault = root / "vault"
        vault.mkdir()
        (vault / "Memory.md").write_text(memory_file(size), encoding="utf-8")
        daemon = Daemon(vault, 1, embedder, 200, root / "state")
        try:
            daemon.start()
            daemon.wait_ready(1, need_vectors=embedder != "none", deadline_seconds=600)
            rng = random.Random(size)
            with daemon.client(timeout=120) as client:
                if embedder != "none":  # warm: every line's vector made and cached before timing
                    # A remember embeds a few missing line vectors and queues the rest for the background.
                    client.call(Remember(id=client.next_id(), fact="Warm-up: the kettle is blue", mode="force"))
                    end = time.monotonic() + 600
                    while time.monotonic() < end:
                        memory = client.call(Status(id=client.next_id())).memory
                        if memory.vectors_known >= memory.facts and memory.vectors_pending == 0:
                            break
                        time.sleep(0.5)
                for n in range(5):  # warm caches and code paths
                    client.call(Remember(id=client.next_id(), fact=f"Warm-up {n}: {fact_line(rng, 90_000 + n)}"))
                # Half new facts (added: dedup, write, index commit), half close to a line (possible
                # update: dedup only), interleaved.
                times: dict[str, list[float]] = {}
                for n in range(requests):
                    fact = new_fact(rng) if n % 2 == 0 else fact_line(rng, 100_000 + n)
                    if pace == "idle":
                        idle(client, embedder != "none")
                    started = time.perf_counter()
                    reply = client.call(Remember(id=client.next_id(), fact=fact))
                    times.setdefault(reply.status, []).append((time.perf_counter() - started) * 1000)
            every = [t for ts in times.values() for t in ts]
            for status, ts in [("all", every), *sorted(times.items())]:
                rows.append([embedder, pace, f"{size:,}", status, len(ts), f"{percentile(ts, 50):.1f}", f"{percentile(ts, 99):.1f}"])
            issues = daemon.log_issues()
            if issues:
                log("tarsd warnings:\n" + "\n".join(issues[-10:]))
        finally:
            daemon.cleanup()
            shutil.rmtree(root, ignore_errors=True)
    return rows


def remember(requests: int, sizes: list[int], embedders: list[str], paces: list[str]) -> None:
    rows = [row for embedder in embedders for pace in paces for row in remember_latency(sizes, requests, embedder, pace)]
    print_table(
        ["embedder", "pace", "Memory.md lines", "reply", "remembers", "p50 ms", "p99 ms"],
        rows,
        "remember latency, client round trip (dedup + atomic write; the index commit is queued); target: well under 100 ms at 1,000 lines\n"
        "pace idle: each remember once tarsd is idle (as a person remembers); burst: back to back, while the\n"
        "previous ones' chunks are still being embedded in the background",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("dedup", "remember", "all"))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--sizes", default="100,1000", help="Memory.md sizes in lines")
    parser.add_argument("--embedders", default="local,none")
    parser.add_argument("--paces", default="idle,burst")
    args = parser.parse_args()
    if args.what in ("dedup", "all"):
        dedup()
    if args.what in ("remember", "all"):
        sizes = [int(size) for size in args.sizes.split(",")]
        remember(args.requests, sizes, args.embedders.split(","), args.paces.split(","))


if __name__ == "__main__":
    main()
