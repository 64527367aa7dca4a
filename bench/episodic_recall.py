"""Episodic recall: is what was said weeks or months ago in front of the model when it matters?

Each question of each set (bench/episodic_sets.py: LoCoMo's conversations written as tars's
session logs, and this project's own knowledge-update and journal sets) is searched as the
chat searches, in the set's own vault, and counts as recalled when every evidence line lies
inside the text the model would receive ("evidence in context"). Measured per category and
per split (dev: tuned on; held-out: never), for:

- ``passages``: today's search hits (one passage per note), in rank order: the top 5, and
  those that fit BUDGET_CHARS characters. Runs on any commit of tars.
- ``fts``, ``vec``, ``hybrid``: recall (tarsd/search/recall.py) in that mode, filling
  BUDGET_CHARS characters with the matching lines and their neighbours.
- ``chat``: what the chat's opening context sends (tarsd/chat/recall.py opening_context, the code the chat
  calls): characters and tokens (the embedder's tokenizer) as sent.

    python bench/episodic_recall.py [--sets locomo updates journals] [--data DIR] [--measures passages fts vec hybrid chat]
                                    [--split dev|held-out] [--json out.json] [--budgets N ...]

``--budgets`` adds hybrid recall at other budgets (``hybrid@N``): what a larger context would buy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import log, met, print_table
from episodic_sets import LOCOMO_DIR, EpisodicSet, Question, locomo_sets
from search_quality import cache_dir, open_cached_index, write_notes

BUDGET_CHARS = 4_400  # what the five passages of the chat's opening context used (issue 44)
TOP = 5
PASSAGE_MEASURES = ("passages",)
RECALL_MODES = ("fts", "vec", "hybrid")
MEASURES = ("passages", *RECALL_MODES, "chat")
SET_NAMES = ("locomo", "updates", "journals")
# Targets (issue 44), on each split: LoCoMo evidence in context at BUDGET_CHARS.
TARGETS = {"hybrid": 0.85, "chat": 0.85, "vec": 0.60}
MULTI_HOP_TARGET = 0.50
HYBRID_OVER_FTS = 0.05
NEWEST_TARGET = 0.90


def write_vault(episodic: EpisodicSet, cache: Path) -> Path:
    return write_notes(cache / f"episodic-{episodic.name}-{episodic.key()}", episodic.notes.items(), episodic.name)


def open_index(episodic: EpisodicSet, vault: Path, cache: Path):
    return open_cached_index(f"episodic-{episodic.name}", vault, cache)


def covered(spans: list[tuple[str, int, int]], lines: list[tuple[str, int]]) -> bool:
    """Every (path, line) inside one of the (path, start, end) spans."""
    return all(any(p == path and s <= line <= e for p, s, e in spans) for path, line in lines)


def first_covering(spans: list[tuple[str, int, int]], line: tuple[str, int]) -> int:
    """The index of the first span holding ``line``; -1 when none does."""
    return next((i for i, (p, s, e) in enumerate(spans) if p == line[0] and s <= line[1] <= e), -1)


def within_budget(hits, budget: int) -> list:
    """The hits that fit ``budget`` characters of text, taken in rank order (stopping at the first that does not)."""
    kept, used = [], 0
    for hit in hits:
        if used + len(hit.text) > budget:
            break
        kept.append(hit)
        used += len(hit.text)
    return kept


def measure_passages(engine, question: Question, count) -> dict:
    response = engine.searcher.search(question.text, mode="hybrid", limit=20)
    out = {}
    for mode in ("fts", "vec", "hybrid"):
        hits = response.results if mode == "hybrid" else engine.searcher.search(question.text, mode=mode, limit=20).results
        top = hits[:TOP]
        fitting = within_budget(hits, BUDGET_CHARS)
        spans_top = [(h.path, h.start_line, h.end_line) for h in top]
        spans_fit = [(h.path, h.start_line, h.end_line) for h in fitting]
        out[f"passages-{mode}"] = {
            "top5": covered(spans_top, question.evidence),
            "any5": any(covered(spans_top, [line]) for line in question.evidence),
            "budget": covered(spans_fit, question.evidence),
            "chars": sum(len(h.text) for h in fitting),
            "chars5": sum(len(h.text) for h in top),
            "tokens": count("\n".join(h.text for h in fitting)),
            **order_fields(spans_fit, question),
        }
    return out


def order_fields(spans: list[tuple[str, int, int]], question: Question) -> dict:
    """For a question with a value that changed: whether the newest is in context, and ahead of every stale one."""
    if question.newest is None:
        return {}
    newest = first_covering(spans, question.newest)
    stale = [first_covering(spans, line) for line in question.stale]
    ahead = newest >= 0 and all(s < 0 or newest < s for s in stale)
    return {"newest": newest >= 0, "ahead": ahead}


def measure_recall(engine, question: Question, mode: str, count, budget: int = BUDGET_CHARS) -> dict:
    from tarsd.search.recall import recall

    started = time.perf_counter()
    result = recall(engine.searcher, question.text, mode=mode, budget_chars=budget)
    seconds = time.perf_counter() - started
    spans = [(piece.path, start, end) for piece in result.pieces for start, end in piece.ranges]
    text = result.text()
    return {
        "budget": covered(spans, question.evidence),
        "chars": len(text),
        "tokens": count(text),
        "dated": all(piece.date for piece in result.pieces),
        "ms": seconds * 1000,
        **order_fields(spans, question),
    }


def measure_chat(engine, question: Question, count) -> dict:
    from tarsd.chat.recall import opening_context

    sent = opening_context(engine.searcher, question.text)
    spans = [(piece.path, start, end) for piece in sent.recalled.pieces for start, end in piece.ranges]
    # What is checked is what is sent: each evidence line's own text must be in the prompt's block.
    inside = covered(spans, question.evidence) and all(line_text(engine, path, line) in sent.text for path, line in question.evidence)
    return {
        "budget": inside,
        "chars": len(sent.text),
        "tokens": count(sent.text),
        "dated": all(piece.date for piece in sent.recalled.pieces),
        **order_fields(spans, question),
    }


_lines_cache: dict[str, list[str]] = {}


def line_text(engine, path: str, line: int) -> str:
    if path not in _lines_cache:
        _lines_cache[path] = (engine.config.vault_path / path).read_text(encoding="utf-8").split("\n")
    return _lines_cache[path][line - 1].strip()


def run_set(episodic: EpisodicSet, measures: list[str], cache: Path, budgets: tuple[int, ...] = ()) -> list[dict]:
    vault = write_vault(episodic, cache)
    engine = open_index(episodic, vault, cache)
    _lines_cache.clear()
    counter, _ = engine.embedder.counter()

    def count(text: str) -> int:
        return counter.count([text])[0] if text else 0

    rows = []
    started = time.perf_counter()
    try:
        for question in episodic.questions:
            row = {"set": episodic.name, "split": episodic.split, "id": question.id, "category": question.category, "q": question.text}
            if "passages" in measures:
                row.update(measure_passages(engine, question, count))
            for mode in RECALL_MODES:
                if mode in measures:
                    row[mode] = measure_recall(engine, question, mode, count)
            if "chat" in measures:
                row["chat"] = measure_chat(engine, question, count)
            for budget in budgets:
                row[f"hybrid@{budget}"] = measure_recall(engine, question, "hybrid", count, budget)
            rows.append(row)
    finally:
        engine.close()
    log(f"[{episodic.name}] {len(rows)} questions in {time.perf_counter() - started:,.1f} s")
    return rows


def share(values: list[bool]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "-"


def columns(rows: list[dict]) -> list[str]:
    """The measures present, each as (row key, field)."""
    found = []
    for mode in ("fts", "vec", "hybrid"):
        if any(f"passages-{mode}" in r for r in rows):
            found.append(f"passages-{mode}")
    found += [m for m in (*RECALL_MODES, "chat") if any(m in r for r in rows)]
    others = {key for r in rows for key in r if key.startswith("hybrid@")}
    return found + sorted(others, key=lambda key: int(key.split("@")[1]))


def heading(key: str) -> str:
    """A measure's column: its name and the budget it was given."""
    name, _, budget = key.partition("@")
    return f"{name} {int(budget) if budget else BUDGET_CHARS:,}ch"


def report(rows: list[dict], title: str) -> dict[tuple[str, str, str], float]:
    """Prints the set's table per split and category; returns {(split, category, measure): share}."""
    shares: dict[tuple[str, str, str], float] = {}
    found = columns(rows)
    table = []
    for split in ("dev", "held-out"):
        in_split = [r for r in rows if r["split"] == split]
        if not in_split:
            continue
        categories = ["all", *sorted({r["category"] for r in in_split})]
        for category in categories:
            group = in_split if category == "all" else [r for r in in_split if r["category"] == category]
            row: list[object] = [split, category, len(group)]
            for key in found:
                values = [r[key]["budget"] for r in group]
                shares[(split, category, key)] = sum(values) / len(values)
                row.append(share(values))
            table.append(row)
    print_table(["split", "category", "n", *[heading(k) for k in found]], table, f"{title}: every evidence line in context")
    extra = []
    for split in ("dev", "held-out"):
        in_split = [r for r in rows if r["split"] == split]
        for key in found:
            if not in_split:
                continue
            chars = [r[key]["chars"] for r in in_split]
            tokens = [r[key]["tokens"] for r in in_split]
            cells = [
                split,
                key,
                f"{statistics.median(chars):,.0f}",
                f"{max(chars):,}",
                f"{statistics.median(tokens):,.0f}",
                f"{max(tokens):,}",
            ]
            if key.startswith("passages-"):
                cells += [share([r[key]["top5"] for r in in_split]), share([r[key]["any5"] for r in in_split])]
            else:
                cells += ["", ""]
            if any("newest" in r[key] for r in in_split):
                cells += [
                    share([r[key]["newest"] for r in in_split if "newest" in r[key]]),
                    share([r[key]["ahead"] for r in in_split if "ahead" in r[key]]),
                ]
            else:
                cells += ["", ""]
            cells.append(share([r[key]["dated"] for r in in_split]) if "dated" in in_split[0][key] else "")
            times = [r[key]["ms"] for r in in_split if "ms" in r[key]]
            cells.append(f"{statistics.median(times):.0f} / {statistics.quantiles(times, n=20)[-1]:.0f}" if len(times) > 1 else "")
            extra.append(cells)
    print_table(
        [
            "split",
            "measure",
            "chars p50",
            "max",
            "tokens p50",
            "max",
            "top 5: all",
            "top 5: any",
            "newest in",
            "newest ahead",
            "dated",
            "ms p50 / p95",
        ],
        extra,
        f"{title}: what goes to the model",
    )
    return shares


def check_locomo(shares: dict[tuple[str, str, str], float]) -> list[str]:
    misses = []
    for split in ("dev", "held-out"):
        if (split, "all", "hybrid") not in shares and (split, "all", "chat") not in shares:
            continue
        lines = []
        for key, target in TARGETS.items():
            if (split, "all", key) in shares:
                lines.append((f"{key} all >= {target}", shares[(split, "all", key)], shares[(split, "all", key)] >= target))
        for key in ("hybrid", "chat"):
            if (split, "multi-hop", key) in shares:
                value = shares[(split, "multi-hop", key)]
                lines.append((f"{key} multi-hop >= {MULTI_HOP_TARGET}", value, value >= MULTI_HOP_TARGET))
        if (split, "all", "hybrid") in shares and (split, "all", "fts") in shares:
            gap = shares[(split, "all", "hybrid")] - shares[(split, "all", "fts")]
            lines.append((f"hybrid - fts >= {HYBRID_OVER_FTS}", gap, gap >= HYBRID_OVER_FTS))
        print(f"\nLoCoMo {split} targets:")
        for what, value, ok in lines:
            print(f"  {what:28} {value:6.3f}  {met(ok)}")
            if not ok:
                misses.append(f"LoCoMo {split}: {what} ({value:.3f})")
    return misses


def load_sets(names: list[str], data: Path) -> dict[str, list[EpisodicSet]]:
    sets: dict[str, list[EpisodicSet]] = {}
    if "locomo" in names:
        sets["locomo"] = locomo_sets(data)
    own = [n for n in names if n != "locomo"]
    if own:
        from episodic_own import own_sets

        for name in own:
            sets[name] = own_sets(name)
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SET_NAMES, default=list(SET_NAMES))
    parser.add_argument("--data", type=Path, default=LOCOMO_DIR, help=f"LoCoMo's conversations (default {LOCOMO_DIR})")
    parser.add_argument("--measures", nargs="+", choices=MEASURES, default=list(MEASURES))
    parser.add_argument("--split", choices=("dev", "held-out"), help="only this split")
    parser.add_argument("--json", type=Path, help="write every question's outcome here")
    parser.add_argument("--budgets", nargs="+", type=int, default=[], help="also hybrid recall at these budgets (characters)")
    args = parser.parse_args()

    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    all_rows: dict[str, list[dict]] = {}
    misses: list[str] = []
    for name, sets in load_sets(args.sets, args.data).items():
        rows = []
        for episodic in sets:
            if args.split and episodic.split != args.split:
                continue
            rows += run_set(episodic, args.measures, cache, tuple(args.budgets))
        all_rows[name] = rows
        shares = report(rows, name)
        if name == "locomo":
            misses += check_locomo(shares)
        else:
            from episodic_own import check_own

            misses += check_own(name, rows)
    if args.json:
        args.json.write_text(json.dumps(all_rows, ensure_ascii=False) + "\n", encoding="utf-8")
    print("\nevery target met:", met(not misses))
    for miss in misses:
        print(f"  {miss}")
    sys.exit(0)


if __name__ == "__main__":
    main()
