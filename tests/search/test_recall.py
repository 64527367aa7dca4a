"""Recall (tarsd/search/recall.py) on tiny vaults: line units for session logs only, kept in step
with the notes; the budget is never passed and says what it spent; a note's date; a message the
vault says nothing about gets nothing; hostile lines stay bounded."""

from __future__ import annotations

from harness.vault_files import write
from tarsd.search.recall import GAP, recall

LOG = """---
type: session-log
started: 2026-02-03T19:30:00+01:00
---
# Bikes

_2026-02-03 19:30 – 19:50_

- you: The bike shop says the frame warranty runs until June.
- tars: Noted, the frame warranty ends in June.
- you: Also the chain needs oil every two weeks.
"""


def units(engine) -> list[tuple[str, int]]:
    return engine.store.conn.execute("SELECT f.path, l.line FROM line_units l JOIN files f ON f.id = l.file_id ORDER BY 1, 2").fetchall()


def test_session_logs_get_a_unit_per_line_and_other_notes_none(make_engine, vault):
    write(vault, "sessions/2026-02-03-1930-bikes.md", LOG)
    write(vault, "Bikes.md", "# Bikes\n\n- The frame warranty runs until June.\n")
    engine = make_engine()
    engine.indexer.sync()
    assert units(engine) == [("sessions/2026-02-03-1930-bikes.md", n) for n in (7, 9, 10, 11)]  # the date line and three turns
    assert engine.store.counts()["pending_line_vectors"] == 0  # embedded with the passages
    assert len(engine.store.line_search(engine.searcher._query_vector("frame warranty"), 10)) == 4
    (vault / "sessions/2026-02-03-1930-bikes.md").unlink()
    engine.indexer.sync()
    assert units(engine) == [] and engine.store.line_search(engine.searcher._query_vector("frame warranty"), 10) == []


def test_recall_keeps_to_its_budget_dates_each_note_and_says_what_it_spent(make_engine, vault):
    write(vault, "sessions/2026-02-03-1930-bikes.md", LOG)
    write(vault, "journal/2026-03-01.md", "# Sunday\n\n- Oiled the chain, checked the frame.\n")
    write(vault, "Long.md", "# Long\n\n" + "".join(f"- The frame of bike {n} is steel and heavy.\n" for n in range(200)))
    engine = make_engine(kind="none")
    engine.indexer.sync()
    for budget in (120, 600, 4400):
        result = recall(engine.searcher, "frame warranty chain", "hybrid", budget_chars=budget)
        assert result.mode == "fts" and 0 < result.chars <= budget and result.pieces
        assert result.spent().startswith(f"{result.chars:,} of {budget:,} characters")
    result = recall(engine.searcher, "frame warranty", "fts", budget_chars=4400)
    by_path = {p.path: p for p in result.pieces}
    log = by_path["sessions/2026-02-03-1930-bikes.md"]
    assert log.dated and log.date == "2026-02-03 19:30" or log.date.startswith("2026-02-0")  # local time of the front matter's
    assert by_path["journal/2026-03-01.md"].dated and by_path["journal/2026-03-01.md"].date == "2026-03-01"
    assert not by_path["Long.md"].dated  # no date of its own: when it last changed
    assert [p.when for p in result.pieces] == sorted((p.when for p in result.pieces), reverse=True)  # newest first
    assert "The bike shop says the frame warranty runs until June." in log.text()


def test_a_message_the_vault_says_nothing_about_gets_no_context(make_engine, vault):
    write(vault, "sessions/2026-02-03-1930-bikes.md", LOG)
    engine = make_engine()
    engine.indexer.sync()
    assert recall(engine.searcher, "zzzxqjkw qwertyuiop", "hybrid", min_score=0.25).pieces == []
    assert recall(engine.searcher, "frame warranty", "hybrid", min_score=0.25).pieces


def test_hostile_lines_stay_bounded_and_in_their_block(make_engine, vault):
    huge = "warranty " * 120_000  # a megabyte on one line
    write(vault, "sessions/2026-01-01-0900-paste.md", f"# Paste\n\n- you: {huge}\n- tars: \x1b[31mred\u202e text about the warranty\n")
    engine = make_engine()
    engine.indexer.sync()
    embedded = engine.store.conn.execute("SELECT max(length(text)) FROM line_units").fetchall()[0][0]
    assert embedded <= 2_540  # a unit is cut to the model's budget before it is counted
    result = recall(engine.searcher, "warranty", "hybrid", budget_chars=4400)
    assert result.chars <= 4400
    for piece in result.pieces:
        assert all(len(line) <= 2_000 for line in piece.lines.values())
        assert GAP not in piece.text().split("\n")[0]


def test_the_chats_opening_context_spends_what_context_chars_says(make_engine, vault):
    """[chat] context_chars is the chat's budget: a larger one brings more of the past (docs/search.md)."""
    from tarsd.chat.recall import opening_context
    from tarsd.config.settings import ChatConfig

    write(vault, "Long.md", "# Long\n\n" + "".join(f"- The frame of bike {n} is steel and heavy.\n" for n in range(200)))
    engine = make_engine(kind="none")
    engine.indexer.sync()
    small = opening_context(engine.searcher, "bike frame", ChatConfig(context_chars=600))
    large = opening_context(engine.searcher, "bike frame", ChatConfig(context_chars=6000))
    assert 0 < small.recalled.chars <= 600 < large.recalled.chars <= 6000
    assert large.recalled.lines > small.recalled.lines
    assert "of 6,000 characters" in large.text and "of 600 characters" in small.text
