"""Chunking hostile notes: seconds, stalls and peak memory per shape, with both token counters.

Each (shape, counter) pair runs in its own child process: "base" is its RSS just before
chunking (text built, tokenizer loaded), "peak" its peak RSS during chunking (VmHWM, reset
first), and "stall" the longest another thread of the process (waking every millisecond)
waited for the GIL meanwhile: what a search in the daemon would wait. A child that takes
longer than --timeout is stopped and reported as such. After the timing, the child checks
the chunks: the largest in characters (embed_text) and in tokens (recounted with the same
counter), and whether they put together give back the note. The shapes measured by default
are the ones of the hostile-input issue; --shape adds others.

    python bench/index_chunk_hostile.py [--mb 5] [--shape NAME ...] [--counter wordpiece|heuristic ...]
                                  [--tree PATH ...] [--repeat N] [--timeout 120]

--tree compares versions side by side, e.g. the one before a change:
    mkdir /tmp/before && git archive HEAD~1 tarsd | tar -x -C /tmp/before
    python bench/index_chunk_hostile.py --tree /tmp/before --tree .
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import string
import subprocess
import sys
import threading
import time

from common import MODEL_DIR, print_table, proc_status_mb

BUDGET = 254
# name -> (description, size multiplier of --mb)
SHAPES = {
    "no-spaces": ("one line of letters and digits, no spaces", 1),
    "random-words": ("one line of random words", 1),
    "cjk": ("one line of CJK text, no spaces", 1),
    "emoji": ("one line of emoji, no spaces", 1),
    "many-lines": ("many ordinary lines and headings", 2),
    "short-lines": ('"a" on every line', 1),
    "blank-lines": ("nothing but line ends", 2),
}
DEFAULT_SHAPES = ["no-spaces", "random-words", "cjk", "emoji", "many-lines"]


def make_text(shape: str, size: int) -> str:
    """About ``size`` bytes of UTF-8 in the given shape (deterministic)."""
    rng = random.Random(0)
    if shape == "no-spaces":
        return "".join(rng.choices(string.ascii_letters + string.digits, k=size))
    if shape == "random-words":
        words = ["".join(rng.choices(string.ascii_lowercase, k=n)) for n in range(1, 15) for _ in range(50)]
        return " ".join(rng.choices(words, k=size // 8))
    if shape == "cjk":  # 3 bytes a character
        return "".join(chr(c) for c in rng.choices(range(0x4E00, 0x9FA5), k=size // 3))
    if shape == "emoji":  # 4 bytes a character, outside the BMP (a surrogate pair in UTF-16)
        return "".join(chr(c) for c in rng.choices(range(0x1F300, 0x1F64F), k=size // 4))
    if shape == "many-lines":
        words = ["".join(rng.choices(string.ascii_lowercase, k=n)) for n in range(2, 10) for _ in range(100)]
        lines: list[str] = []
        total = 0
        while total < size:
            if rng.random() < 0.05:
                line = "#" * rng.randint(1, 3) + " " + " ".join(rng.choices(words, k=4))
            elif rng.random() < 0.2:
                line = ""
            else:
                line = " ".join(rng.choices(words, k=rng.randint(3, 30)))
            lines.append(line)
            total += len(line) + 1
        return "\n".join(lines)
    if shape == "short-lines":
        return "a\n" * (size // 2)
    if shape == "blank-lines":
        return "\n" * size
    raise ValueError(shape)


def counter_named(name: str):
    from tarsd.embed.embedder import WordPieceCounter
    from tarsd.markdown.chunker import HeuristicCounter

    if name == "wordpiece":
        return WordPieceCounter(MODEL_DIR / "tokenizer.json", "all-MiniLM-L6-v2")
    return HeuristicCounter()


def child(shape: str, counter_name: str, size: int) -> None:
    from tarsd.markdown.chunker import chunk_note

    text = make_text(shape, size)
    counter = counter_named(counter_name)
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # resets VmHWM: the peak of building the text is not the chunker's
    base = proc_status_mb("VmRSS")
    done, gaps = threading.Event(), [0.0]

    def probe() -> None:
        last = time.perf_counter()
        while not done.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps[0], last = max(gaps[0], now - last), now

    prober = threading.Thread(target=probe)
    prober.start()
    started = time.perf_counter()
    note = chunk_note(text, counter, BUDGET)
    seconds = time.perf_counter() - started
    done.set()
    prober.join()
    peak = proc_status_mb("VmHWM")
    chunks = note.chunks
    recounted = counter.count([c.embed_text for c in chunks]) if chunks else [0]
    # With overlap some text repeats; without, the pieces of each line must join back exactly.
    joined = "".join(c.text.replace("\n", "") for c in chunk_note(text, counter, BUDGET, overlap=0).chunks)
    result = {
        "seconds": seconds,
        "stall": gaps[0],
        "base": base,
        "peak": peak,
        "chunks": len(chunks),
        "max_chars": max((len(c.embed_text) for c in chunks), default=0),
        "max_tokens": max(recounted),
        "joins": joined == "".join(text.split("\n")),
    }
    print(json.dumps(result))


def run_child(shape: str, counter_name: str, size: int, tree: str | None, timeout: float) -> dict | str:
    """One measurement in a fresh process (with ``tree`` first on its path): the child's
    figures, or why there are none."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])))
    command = [sys.executable, __file__, "--child", shape, counter_name, str(size)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True, env=env)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:g} s"
    except subprocess.CalledProcessError as exc:
        return f"failed: {exc.stderr.strip().splitlines()[-1]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=5.0, help="size of the one-line shapes in MB (many-lines is twice this)")
    parser.add_argument("--shape", action="append", choices=list(SHAPES), help="only these shapes (repeatable)")
    parser.add_argument("--counter", action="append", choices=["wordpiece", "heuristic"], help="only these counters (repeatable)")
    parser.add_argument("--tree", action="append", help="measure the tarsd of this source tree (repeatable; default: this one)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement: the median time and the largest peak are shown")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a child is stopped")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        shape, counter_name, size = args.child
        child(shape, counter_name, int(size))
        return

    trees = args.tree or [None]
    rows = []
    for shape in args.shape or DEFAULT_SHAPES:
        size = int(args.mb * SHAPES[shape][1] * 1_000_000)
        for counter_name in args.counter or ["wordpiece", "heuristic"]:
            # Trees take turns, run after run: on a shared box a comparison then sees the same load.
            runs: dict[str | None, list] = {tree: [] for tree in trees}
            for _ in range(args.repeat):
                for tree in trees:
                    runs[tree].append(run_child(shape, counter_name, size, tree, args.timeout))
            for tree in trees:
                label = [shape, counter_name] + ([os.path.basename(os.path.abspath(tree)) if tree else "this"] if len(trees) > 1 else [])
                failed = next((r for r in runs[tree] if isinstance(r, str)), None)
                if failed:
                    rows.append([*label, "", "", "", "", "", "", "", failed])
                    continue
                r = runs[tree][-1]
                rows.append(
                    [
                        *label,
                        f"{statistics.median(x['seconds'] for x in runs[tree]):.2f}",
                        f"{max(x['stall'] for x in runs[tree]) * 1000:,.0f}",
                        f"{r['base']:.0f}",
                        f"{max(x['peak'] for x in runs[tree]):.0f}",
                        f"{r['chunks']:,}",
                        f"{r['max_chars']:,}",
                        f"{r['max_tokens']:,}",
                        "yes" if r["joins"] else "NO",
                    ]
                )
    headers = ["shape", "counter", *(["tree"] if len(trees) > 1 else []), "seconds", "stall ms", "base MB", "peak MB"]
    headers += ["chunks", "max chars", "max tokens", "joins back"]
    title = f"chunk_note on hostile notes, budget {BUDGET} tokens, {args.mb:g} MB (many-lines, blank-lines: twice that)"
    print_table(headers, rows, title)


if __name__ == "__main__":
    main()
