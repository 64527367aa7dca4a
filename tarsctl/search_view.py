"""How tarsctl shows a search: a hit per block for a person, a JSON object per hit for a
script, and the sentences that say when results may be incomplete.

It works on anything with the reply's fields as attributes: the msgspec structs of the full
client (cli.py) and the namespaces of the quick path's JSON (quick.py), so both print the same
text. It imports only the standard library (and shown.py, which does too): every piece of
a note (path, title, heading, snippet) goes through shown_text before it reaches the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tarsctl.shown import shown_text


def coverage_notes(coverage, semantic: bool) -> list[str]:
    """One sentence per way results may be incomplete ("semantic": vectors matter too);
    ``coverage`` has protocol.Coverage's fields."""
    notes = []
    if coverage.vault_error:
        notes.append(f"{coverage.vault_error}: results come from the index as it was before")
    if coverage.watcher:
        notes.append(coverage.watcher)
    if not coverage.reconciled:
        if coverage.scan_total:
            notes.append(f"index still being built: {coverage.scan_done:,} of {coverage.scan_total:,} notes checked")
        else:
            notes.append(f"index still being built: the start-up scan has not finished ({coverage.notes_indexed:,} notes so far)")
    if semantic and coverage.pending_vectors and coverage.embedder != "disabled":
        notes.append(f"{coverage.pending_vectors:,} of {coverage.chunks:,} passages not embedded yet: semantic results are partial")
    return notes


def show_search(reply, coverage, as_json: bool, to_json: Callable[[object], str]) -> None:
    """``reply`` has SearchResults' fields, ``coverage`` Coverage's (the reply's, or the
    defaults when it had none); ``to_json`` writes one object, every field included."""
    notes = reply.warnings + coverage_notes(coverage, semantic=reply.mode != "fts")
    if as_json:
        for hit in reply.results:
            sys.stdout.write(to_json(hit) + "\n")
        # Hits alone on stdout; what a script needs to judge them, as one JSON line on stderr.
        summary = {"mode": reply.mode, "coverage": coverage, "warnings": notes, "elapsed_ms": reply.elapsed_ms}
        sys.stderr.write(to_json(summary) + "\n")
        return
    for note in notes:
        print(f"tarsctl: warning: {shown_text(note)}", file=sys.stderr)
    tty = sys.stdout.isatty()
    if not reply.results:
        print("no results", file=sys.stderr)
    for hit in reply.results:
        where = " › ".join(shown_text(part) for part in (hit.title, hit.heading) if part)
        print(f"{shown_text(hit.path)}:{hit.start_line}  {where}  [{hit.band} {hit.score:.2f}]")
        print(f"    {bold(shown_text(hit.snippet), tty)}")
        if hit.explain is not None:
            print(f"    why: {why(hit.explain)}")


def show_pong(reply, as_json: bool, to_json: Callable[[object], str]) -> None:
    print(to_json(reply) if as_json else f"pong from {shown_text(reply.server)} (up {reply.uptime:.0f} s)")


def bold(snippet: str, tty: bool) -> str:
    """The query's words (between ** marks) in bold on a terminal; ``snippet`` is cleaned already,
    so these are the only escape sequences on the line."""
    parts = snippet.split("**")
    if not tty or len(parts) % 2 == 0:
        return snippet
    return "".join(f"\033[1m{part}\033[0m" if i % 2 else part for i, part in enumerate(parts))


def why(explain) -> str:
    keyword = "no keyword match"
    if explain.keyword_rank:
        keyword = f"keyword #{explain.keyword_rank} (bm25 {explain.bm25:.2f}, covers {explain.coverage:.0%})"
    vector = f"vector #{explain.vector_rank} (cosine {explain.cosine:.2f})" if explain.vector_rank else "no vector match"
    boosts = [f"{name} +{value:.2f}" for name, value in (("title", explain.title_boost), ("links", explain.link_boost)) if value]
    named = ["the query is its name"] if explain.named else []
    # The shown score is read from this: the mode's value mapped onto its scale, or a rule's floor or cap.
    value, _, scale = explain.scale.partition(" on ")
    scored = f"{value or 'fused'} {explain.fused:.3f} -> {explain.calibrated:.2f}" + (f" on {shown_text(scale)}" if scale else "")
    rule = [f"shown {shown_text(explain.rule)}"] if explain.rule else []
    return "; ".join([*named, keyword, vector, *boosts, scored, *rule])
