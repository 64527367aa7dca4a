"""Merging a conflict copy into Memory.md (tarsd/memory/merge.py, tarsd/sync/merging.py): how long it takes.

    python bench/merge.py            # 1,000-line Memory.md with a 1,000-line conflict copy; 20 runs each

Two Memory.md versions of 1,000 fact lines under 25 headings that drifted apart the way two machines'
copies do: each holds 100 lines the other lacks (added on one machine), 20 lines the journal shows
forgotten after they were written, 20 hand edits, a few headings only one side has, and stamped,
model-noted and hand-written lines mixed. Timed: ``merge`` alone (text in, text out, with the journal
read), and the whole of ``merge_copy`` on a real temp vault (read the copy, merge under the memory
lock, write atomically with the write guard, move the copy to .tars/merged/). Target: < 1 s.
"""

from __future__ import annotations

import logging
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, print_table  # noqa: E402

from tarsd.config.settings import MemoryConfig  # noqa: E402
from tarsd.memory.files import MemoryFiles  # noqa: E402
from tarsd.memory.journal import Journal  # noqa: E402
from tarsd.memory.merge import MEMORY, merge  # noqa: E402
from tarsd.sync.merging import merge_copy  # noqa: E402
from tarsd.vault.conflicts import conflict_copy  # noqa: E402

LINES, SECTIONS, RUNS, TARGET_SECONDS = 1000, 25, 20, 1.0
WORDS = "bake bread oven tea garden bike chain river city piano train book coffee dog cat plant phone desk lamp road".split()


def fact(rng: random.Random, n: int) -> str:
    stamp = rng.choice(["<!-- tars:2026-11-27 -->", "<!-- tars:2026-11-26 chat:cli by:model -->", ""])
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10)))
    return f"- Fact {n}: {words} {stamp}".rstrip()


def versions(journal: Journal, rng: random.Random) -> tuple[str, str]:
    sections: list[list[str]] = [[] for _ in range(SECTIONS)]
    for n in range(LINES - 100):
        sections[n % SECTIONS].append(fact(rng, n))
    ours = [list(lines) for lines in sections]
    theirs = [list(lines) for lines in sections]
    for n in range(LINES - 100, LINES):  # 100 lines each side lacks
        ours[n % SECTIONS].append(fact(rng, n))
        theirs[(n * 7) % SECTIONS].append(fact(rng, n + 10_000))
    forgotten = [theirs[i % SECTIONS][i // SECTIONS] for i in range(20)]
    journal.wrote("Memory.md", added=[(line, "x") for line in forgotten])
    time.sleep(0.01)
    journal.wrote("Memory.md", removed=forgotten)
    for line in forgotten:  # forgotten on our side, still in theirs
        for lines in ours:
            if line in lines:
                lines.remove(line)
    for i in range(20):  # hand edits in theirs
        lines = theirs[(i * 3) % SECTIONS]
        lines[-1] = lines[-1].split(" <!--")[0] + " (edited)"
    heading = [f"# Topic {i}" for i in range(SECTIONS)]
    text_ours = "\n\n".join("\n".join([heading[i], *ours[i]]) for i in range(SECTIONS)) + "\n"
    text_theirs = "\n\n".join("\n".join([heading[i], *theirs[i]]) for i in range(SECTIONS)) + "\n\n# Only theirs\n- x\n"
    return text_ours, text_theirs


def main() -> None:
    logging.basicConfig(level=logging.ERROR)  # the merge's report lines, 20 times over, say nothing new here
    rng = random.Random(46)
    root = Path(tempfile.mkdtemp(prefix="tars-merge-bench-"))
    try:
        vault = root / "vault"
        vault.mkdir()
        journal = Journal(vault, "benchbench01")
        ours, theirs = versions(journal, rng)
        log(f"versions: {len(ours.splitlines())} and {len(theirs.splitlines())} lines")
        text_times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            result = merge(ours, theirs, MEMORY, "Memory.md", journal.view())
            text_times.append(time.perf_counter() - start)
        log(f"merged: {len(result.added)} added, {len(result.removed)} left out, {len(result.kept)} kept, {result.duplicates} shared")
        copy_name = "Memory.sync-conflict-20261127-101500-ABCDEFG.md"
        file_times = []
        for _ in range(RUNS):
            (vault / "Memory.md").write_text(ours, encoding="utf-8")
            (vault / copy_name).write_text(theirs, encoding="utf-8")
            memory = MemoryFiles(vault, MemoryConfig())  # a fresh one each run: its guard watches nothing yet
            memory.journal = journal
            start = time.perf_counter()
            done = merge_copy(vault, conflict_copy(copy_name), MEMORY, memory, journal, "benchbench01", 10_000_000)
            file_times.append(time.perf_counter() - start)
            memory.guard.stop()
            assert done is not None and not (vault / copy_name).exists()
        rows = []
        for what, times in (("merge (text, journal read)", text_times), ("merge_copy (files, atomic write, archive)", file_times)):
            p50, worst = statistics.median(times), max(times)
            rows.append(
                [
                    what,
                    f"{p50 * 1000:.1f} ms",
                    f"{worst * 1000:.1f} ms",
                    f"< {TARGET_SECONDS:g} s",
                    "yes" if worst < TARGET_SECONDS else "no",
                ]
            )
        print_table(["1,000 lines with a 1,000-line copy", "p50", f"worst of {RUNS}", "target", "met"], rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
