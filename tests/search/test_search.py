"""Search modes, RRF, filters, result shape and the keyword parser against hostile input."""

from __future__ import annotations

import pytest

from harness.vault_files import write
from tarsd.search.searcher import Searcher, band, fts_query
from tarsd.store.database import Filter, Store

NOTES = {
    "Memory.md": "# Core\n\n- Name: Sam\n- Dog: Perry, a beagle who loves the beach\n",
    "Procedural.md": "# Rules\n\n- Answer briefly, without fluff.\n",
    "sessions/2024-05-01-1200-trip.md": "# Trip planning\n\nWe planned a train trip to Lisbon in June.\n",
    "projects/tars.md": "# tars\n\nThe daemon indexes markdown with SQLite FTS5 and sqlite-vec.\n"
    + "It watches the vault. " * 60
    + "\n\n## Search\n\nHybrid search fuses BM25 and vectors with reciprocal rank fusion.\n"
    + "Scores fall in bands. " * 40
    + "\n",
    "projects/100%_done.md": "# Finished\n\nThe kitchen renovation is complete.\n",
    "recipes/bread.md": "# Sourdough\n\nFeed the starter, then bake the loaf at 250 degrees.\n",
}

HOSTILE = [
    '"',
    '""',
    '"unbalanced',
    "a:b",
    "title:foo",
    "(",
    ")",
    "((a)",
    "a AND",
    "AND",
    "OR OR",
    "NOT",
    "NOT NOT x",
    "*",
    "**",
    "a*",
    "-",
    "-x",
    "^",
    "a^b",
    "NEAR(a b)",
    "NEAR/3",
    "{a b}",
    "[x]",
    "a + b",
    "c++",
    "C#",
    ".",
    "'",
    "'; DROP TABLE chunks; --",
    "\\",
    "\x00",
    "🙂",
    "🙂 tomatoes",
    "東京タワー",
    "日本語のテキスト",
    "naïve café",
    "x" * 5000,
    " ".join(["word"] * 500),
    "\n\t",
    "%",
    "_",
    "col:umn:s",
    'a"b"c',
    "\u202e",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]


@pytest.fixture
def indexed(make_engine, vault):
    for rel, text in NOTES.items():
        write(vault, rel, text)
    engine = make_engine()
    engine.indexer.sync()
    return engine


@pytest.mark.parametrize("mode", ["fts", "vec", "hybrid"])
def test_each_mode_finds_the_right_note(indexed, mode):
    results = indexed.searcher.search("what is the name of my dog?", mode=mode).results
    assert results[0].path == "Memory.md"
    assert all(0.0 <= r.score <= 1.0 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_result_shape(indexed):
    result = indexed.searcher.search("reciprocal rank fusion", mode="fts", per_file=False).results[0]
    assert result.path == "projects/tars.md"
    assert result.title == "tars"
    assert result.heading_path == "tars > Search"
    assert (result.start_line, result.end_line) == (6, 9)
    lines = NOTES["projects/tars.md"].splitlines()
    assert result.text == "\n".join(lines[5:9])
    assert "**reciprocal**" in result.snippet.lower() and "**fusion**" in result.snippet
    assert result.band == band(result.score)
    assert result.memory_type == "note"


def test_semantic_match_without_shared_words(indexed):
    results = indexed.searcher.search("holiday by rail to Portugal", mode="vec").results
    assert results[0].path == "sessions/2024-05-01-1200-trip.md"
    assert "**" not in results[0].snippet or "rail" not in results[0].snippet


def test_natural_language_question_matches_without_every_word(indexed):
    # Most words of the question appear nowhere; BM25 over OR-ed terms still finds the loaf.
    assert (
        indexed.searcher.search("at what temperature should I bake my sourdough bread?", mode="fts").results[0].path == "recipes/bread.md"
    )


def test_stemming(indexed):
    assert indexed.searcher.search("baking loaves", mode="fts").results[0].path == "recipes/bread.md"


def test_filters(indexed):
    search = indexed.searcher.search
    for mode in ("fts", "vec", "hybrid"):
        assert {
            r.memory_type for r in search("dog beach rules trip", mode=mode, where=Filter(memory_types=("semantic", "procedural"))).results
        } <= {
            "semantic",
            "procedural",
        }
        assert {r.path for r in search("daemon kitchen", mode=mode, where=Filter(path_prefix="projects/")).results} <= {
            "projects/tars.md",
            "projects/100%_done.md",
        }
    # A prefix is literal: % and _ are not wildcards.
    assert [r.path for r in search("kitchen renovation", mode="fts", where=Filter(path_prefix="projects/100%_")).results] == [
        "projects/100%_done.md"
    ]
    assert search("kitchen renovation", mode="fts", where=Filter(path_prefix="projects/1000")).results == []


def test_one_result_per_file_or_all_chunks(indexed):
    per_file = indexed.searcher.search("search markdown daemon fusion", mode="fts", limit=10).results
    all_chunks = indexed.searcher.search("search markdown daemon fusion", mode="fts", limit=10, per_file=False).results
    assert [r.path for r in per_file].count("projects/tars.md") == 1
    assert [r.path for r in all_chunks].count("projects/tars.md") == 2


def test_limit_and_min_score(indexed):
    assert len(indexed.searcher.search("the", mode="vec", limit=2).results) == 2
    everything = indexed.searcher.search("dog", mode="hybrid", limit=10).results
    strict = indexed.searcher.search("dog", mode="hybrid", limit=10, min_score=0.6).results
    assert strict and all(r.score >= 0.6 for r in strict) and len(strict) < len(everything)


def test_hybrid_beats_a_single_list_that_disagrees(indexed):
    result = indexed.searcher.search("beagle", mode="hybrid").results[0]
    assert result.path == "Memory.md" and result.band == "relevant"


def test_parser_never_raises(indexed):
    for query in HOSTILE:
        for mode in ("fts", "hybrid"):
            response = indexed.searcher.search(query, mode=mode)
            assert isinstance(response.results, list), query
    assert indexed.searcher.search("🙂 tomatoes beagle", mode="fts").results[0].path == "Memory.md"


def test_parser_output():
    assert fts_query("tomatoes AND basil") == '"tomatoes" OR "basil"'
    assert fts_query('"exact phrase" other') == '"exact phrase" OR "other"'
    assert fts_query("garden*") == '"garden"*'
    assert fts_query("what is it") == '"what" OR "is" OR "it"'  # only stopwords: keep them
    assert fts_query("🙂 ()") == ""
    assert fts_query('say "hi') == '"say" OR "hi"'


def test_empty_index_missing_database_and_empty_query(make_engine, tmp_path):
    engine = make_engine()
    assert engine.searcher.search("anything").results == []
    assert engine.searcher.search("", mode="fts").results == []
    assert engine.searcher.search("   ").results == []
    fresh = Store(tmp_path / "never" / "existed.sqlite3")
    try:
        assert Searcher(fresh, engine.embedder).search("anything", mode="hybrid").results == []
    finally:
        fresh.close()


def test_bands():
    assert [band(s) for s in (1.0, 0.75, 0.74, 0.5, 0.3, 0.1, 0.0)] == ["relevant", "relevant", "kinda", "kinda", "maybe", "not", "not"]


def test_a_big_vaults_commonest_words_are_left_out_of_the_keyword_search():
    from tarsd.search.searcher import KEYWORD_POSTINGS_BUDGET, affordable_phrases

    assert affordable_phrases([5, 900, 40]) == [0, 1, 2]  # within the budget: every word is searched
    common = KEYWORD_POSTINGS_BUDGET
    # Past it: the rarest words that fit, in the query's order; the commonest go.
    assert affordable_phrases([common, 38, 4_440, common // 2, 15_581]) == [1, 2, 3]
    assert affordable_phrases([common * 3, common * 2]) == [1]  # always the rarest one, even alone over the budget
    assert affordable_phrases([]) == []


def test_a_paragraph_long_query_never_fails_and_is_never_sure(make_engine, vault):
    """A query of 100 distinct words, every one in a note's title: the keyword search takes the
    first 64 (MAX_QUERY_TERMS), every one of them counted in coverage (a 32nd phrase matched in a
    title once set bit 63 of an integer match set, which SQLite cannot hold, and failed the whole
    search); a word past the 64th is not searched; and a paragraph-long query's hits are shown at
    most as maybe (docs/search.md)."""
    from tarsd.search.searcher import MAX_QUERY_TERMS

    words = [f"word{n}" for n in range(100)]
    write(vault, "target.md", f"# {' '.join(words)}\n\nEvery word of the question is in this title.\n")
    write(vault, "fiftieth.md", f"# Fiftieth\n\n{words[50]} and nothing else of it.\n")
    write(vault, "seventieth.md", f"# Seventieth\n\n{words[70]} and nothing else of it.\n")
    engine = make_engine(kind="none")
    engine.indexer.sync()
    results = engine.searcher.search(" ".join(words), mode="fts", limit=5, explain=True).results
    assert MAX_QUERY_TERMS == 64
    # Every searched word counted, and more than 32 of them in the title (which keeps its first
    # 300 characters: about 44 of these words).
    assert results[0].path == "target.md" and results[0].explain.coverage == 1.0 and results[0].explain.title_coverage > 40 / 64
    by_path = {r.path: r for r in results}
    assert "fiftieth.md" in by_path and by_path["fiftieth.md"].explain.coverage > 0  # past the 31st word, still counted
    assert "seventieth.md" not in by_path  # past the 64th: not searched
    assert {r.band for r in results} <= {"maybe", "not"}


def test_a_paragraph_long_query_keeps_its_common_words_and_weighs_bm25_not_coverage():
    """A long query's keyword search may score more passages before its commonest words go, and
    its hybrid value is the BM25 share and the cosine, not the share of its words a passage holds
    (a paragraph is never covered: docs/search.md)."""
    from tarsd.search.searcher import (
        KEYWORD_POSTINGS_BUDGET,
        LONG_QUERY_POSTINGS_BUDGET,
        Candidate,
        affordable_phrases,
        fuse_tars,
        length_share,
    )

    common = KEYWORD_POSTINGS_BUDGET
    assert affordable_phrases([common, 38, common // 2]) == [1, 2]
    assert affordable_phrases([common, 38, common // 2], LONG_QUERY_POSTINGS_BUDGET) == [0, 1, 2]

    assert length_share("a claim of a dozen words or so, as people ask") == 0.0
    assert length_share(" ".join(["word"] * 60)) == 1.0
    few = Candidate(chunk=1, path="a.md", bm25=9.0, top_bm25=10.0, coverage=0.2, query_coverage=0.9, cosine=0.5)
    many = Candidate(chunk=2, path="b.md", bm25=9.0, top_bm25=10.0, coverage=0.8, query_coverage=0.9, cosine=0.5)
    assert fuse_tars(many) > fuse_tars(few)  # a short query: the passage holding more of its words first
    few.length_share = many.length_share = 1.0
    assert fuse_tars(many) == fuse_tars(few)  # a paragraph: coverage says nothing


def test_a_keyword_hit_among_near_equals_is_not_shown_as_relevant(make_engine, vault):
    """fts: a hit that holds every rare word of the query is relevant only when it also leads the
    next hit (LEADS): two notes saying the same thing are two close answers, kinda at best."""
    write(vault, "alone.md", "# Physics\n\nLattice chromodynamics on a quantum computer.\n")
    write(vault, "twin-a.md", "# Garden\n\nHeirloom tomatoes ripen by the south wall.\n")
    write(vault, "twin-b.md", "# Garden too\n\nHeirloom tomatoes ripen by the south wall.\n")
    for n in range(8):
        write(vault, f"filler/{n}.md", f"# Filler {n}\n\nNothing about the question here, note {n}.\n")
    engine = make_engine(kind="none")
    engine.indexer.sync()
    alone = engine.searcher.search("lattice chromodynamics quantum", mode="fts").results
    assert alone[0].path == "alone.md" and alone[0].band == "relevant"
    twins = engine.searcher.search("heirloom tomatoes ripen", mode="fts").results
    assert {r.path for r in twins[:2]} == {"twin-a.md", "twin-b.md"}
    assert [r.band for r in twins[:2]] == ["kinda", "kinda"]


def test_a_question_in_the_users_own_words_finds_the_note_that_answers_it(make_engine, vault):
    """hybrid: when no keyword match holds much of the question's rare words (a paraphrase), the
    keyword weight drops (keyword_weight), so the note nearest in meaning leads rather than the
    note that shares a few of the question's incidental words. Under the weight before it
    (0.4 + 0.2 * query coverage) printing.md led: 0.333 against 0.287."""
    write(
        vault,
        "daily.md",
        "# Daily notes\n\nOpen Daily Note makes a journal entry for today: write down the events of your day there, "
        "and find earlier entries in the journal folder.\n",
    )
    write(vault, "printing.md", "# Printing\n\nTo print a new page, choose Print from the File menu and pick the printer.\n")
    for n, topic in enumerate(["groceries and the weekly shop", "the bike's gears", "a birthday party plan", "tax forms"]):
        write(vault, f"filler/{n}.md", f"# Note {n}\n\nA few lines about {topic}, and nothing else.\n")
    engine = make_engine()
    engine.indexer.sync()
    question = "How can I get a new page for each day where I jot down what happened?"
    assert engine.searcher.search(question, mode="fts").results[0].path == "printing.md"  # "new page"
    assert engine.searcher.search(question, mode="vec").results[0].path == "daily.md"
    assert engine.searcher.search(question, mode="hybrid").results[0].path == "daily.md"
    # A query whose rare words a note holds is still answered by keywords first.
    assert engine.searcher.search("print a new page", mode="hybrid").results[0].path == "printing.md"


def test_the_keyword_weight_follows_how_much_of_the_query_the_best_keyword_match_holds():
    from tarsd.search.searcher import COVERAGE_HIGH, COVERAGE_LOW, KEYWORD_WEIGHT_HIGH, KEYWORD_WEIGHT_LOW, keyword_weight

    assert keyword_weight(0.0) == keyword_weight(COVERAGE_LOW) == KEYWORD_WEIGHT_LOW
    assert keyword_weight(1.0) == keyword_weight(COVERAGE_HIGH) == KEYWORD_WEIGHT_HIGH
    middle = keyword_weight((COVERAGE_LOW + COVERAGE_HIGH) / 2)
    assert middle == pytest.approx((KEYWORD_WEIGHT_LOW + KEYWORD_WEIGHT_HIGH) / 2)


def test_a_hits_band_is_its_chance_of_being_relevant(indexed):
    """The shown score is the chance from the mode's model (tarsd/search/bands.py) on the bands'
    scale: higher for a higher value and a bigger lead over the next hit, lower down the list, and
    never rising down it; the bands begin where the promise does (chance 0.1, 0.5, 0.9)."""
    from tarsd.search import bands
    from tarsd.search.searcher import Candidate

    assert [bands.shown(p) for p in (0.0, 0.1, 0.5, 0.9, 1.0)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [band(bands.shown(p)) for p in (0.05, 0.3, 0.7, 0.95)] == ["not", "maybe", "kinda", "relevant"]

    def ranked(cosines):
        found = [Candidate(chunk=n + 1, path=f"{n}.md", vector_rank=n + 1, cosine=c) for n, c in enumerate(cosines)]
        return indexed.searcher.rank(found, "vec")

    alone, crowded, weak = ranked([0.8, 0.4, 0.3]), ranked([0.8, 0.79, 0.78]), ranked([0.3, 0.2, 0.1])
    assert alone[0].chance > crowded[0].chance > weak[0].chance  # the lead and the value count
    assert crowded[0].chance > crowded[1].chance > crowded[2].chance  # and the rank
    for hits in (alone, crowded, weak):
        assert [c.score for c in hits] == sorted((c.score for c in hits), reverse=True)
        assert all(not c.rule or c.rule.startswith("raised") for c in hits)
    # fts: a keyword match holding a tenth of the query, among others as good, is a weak guess.
    keyword = [Candidate(chunk=n + 4, path=f"k{n}.md", keyword_rank=n + 1, bm25=1.0, top_bm25=1.0, query_coverage=0.1) for n in range(3)]
    assert {band(c.score) for c in indexed.searcher.rank(keyword, "fts")} <= {"not", "maybe"}
