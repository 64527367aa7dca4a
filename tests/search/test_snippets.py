"""Hits a person can read: snippets as plain text with whole words marked, and the heading
shown only when it says more than the title. Real SQLite + FTS5 (its tokenizer marks the
words), the shared Dendron vault and the example vault."""

from __future__ import annotations

import re
import shutil

import pytest

from harness.paths import DENDRON, REPO
from harness.vault_files import write
from tarsd.markdown.visible import URL, visible_text
from tarsd.search.searcher import query_parts
from tarsd.search.snippets import WORD_JOINER, make_snippet, query_phrases

QUERIES = ("publish my notes", "lookup", "markdown links github")
SHOWN_URL = re.compile(r"\b(?:https?://|www\.)\S+")
HEADING_MARK = re.compile(r"(?:^|…|\s)#{1,6}\s")
HEADING_LINE = re.compile(r" {0,3}#{1,6}\s")  # four spaces: indented code
LINK_MARKS = ("](", "[[", "![[")


@pytest.fixture(scope="module")
def dendron_engine(tmp_path_factory):
    """The whole Dendron vault, keywords only (snippets come from the keyword tokenizer)."""
    from tarsd.config.settings import load_config
    from tarsd.search.engine import Engine

    root = tmp_path_factory.mktemp("dendron-snippets")
    shutil.copytree(DENDRON, root / "vault", ignore=shutil.ignore_patterns(".*"))
    (root / "config.toml").touch()
    settings = {"vault_path": root / "vault", "index_db_path": root / "index.sqlite3", "embedder_kind": "none"}
    engine = Engine(load_config(path=root / "config.toml", env={}, **settings))
    engine.indexer.sync()
    yield engine
    engine.close()


def snippet(store, passage: str, query: str) -> str:
    return make_snippet(passage, query_phrases(query_parts(query), store.keyword_tokens), store.keyword_token_spans, ("**", "**"))


def unmarked(text: str) -> str:
    return text.replace("**", "").replace(WORD_JOINER, "").strip("…")


def test_every_dendron_passage_gives_a_plain_text_snippet(dendron_engine):
    store = dendron_engine.store
    passages = store.reader().execute("SELECT f.path, c.text FROM chunks c JOIN files f ON f.id = c.file_id").fetchall()
    assert len(passages) > 3000
    marked = in_code = 0
    for path, text in passages:
        visible = visible_text(text)
        marked_lines = [line for line in visible.splitlines() if HEADING_LINE.match(line) or any(mark in line for mark in LINK_MARKS)]
        if marked_lines:
            in_code += 1  # code keeps its text exactly, "[[x]]" or "# comment" included
            assert "`" in text or "~~~" in text, (path, marked_lines)
        shown = " ".join(visible.split())
        for query in QUERIES:
            found = snippet(store, text, query)
            marked += "**" in found
            assert unmarked(found) in shown, (path, query, found)  # a window of the visible text, nothing else
            assert not any("**" in url for url in SHOWN_URL.findall(found)), (path, query, found)
            assert found.count("**") % 2 == 0, (path, query, found)  # literal "**" (in code) is cut by a word joiner

    assert marked > 500  # the property is exercised, not vacuous
    assert in_code < len(passages) / 20  # Dendron documents markdown: its code shows links and headings


def test_dendron_hits_show_no_markup(dendron_engine):
    for query in QUERIES:
        for hit in dendron_engine.searcher.search(query, mode="fts", limit=30).results:
            if any(mark in hit.snippet for mark in LINK_MARKS) or HEADING_MARK.search(hit.snippet):
                assert "`" in hit.text, (hit.path, hit.snippet)  # markup left only where code shows it
            assert not any("**" in url for url in SHOWN_URL.findall(hit.snippet)), (hit.path, hit.snippet)
            assert not re.search(r"[\[\]]", hit.heading), (hit.path, hit.heading)
            assert hit.heading.casefold() != hit.title.casefold()


def test_what_issue_21_saw(dendron_engine):
    hits = {hit.path: hit for hit in dendron_engine.searcher.search("lookup", mode="fts", limit=30).results}
    partial = hits["templates.partial.lookup.md"]  # its heading is a link: [Lookup](https://handbook.dendron.so/...#lookup)
    assert partial.heading_path.startswith("[Lookup](https://") and partial.heading == ""
    assert partial.snippet.startswith("**Lookup** This section") and "https" not in partial.snippet
    feature = hits["tags.feature.lookup.md"]
    assert "dendron.topic.**lookup**" in feature.snippet and "[[" not in feature.snippet


def test_marks_fall_on_whole_words_never_in_urls_or_link_targets(make_engine, vault):
    engine = make_engine(kind="none")
    store = engine.store
    passage = (
        "## Publish your notes\n"
        "Read [how to publish](https://docs.dendron.so/notes/publish/) and [[dendron.topic.publish.cook#export-notes]], "
        "or [[Export|dendron.topic.publish.cook.common#export-notes]]; see https://example.com/notes_publish and "
        "<https://example.com/publish>. Set GITHUB_TOKEN for github, then **publishing** works.\n"
        "```bash\n# publish from a script\n```\n"
    )
    found = make_snippet(
        passage, query_phrases(query_parts("publish notes github"), store.keyword_tokens), store.keyword_token_spans, ("[", "]"), size=60
    )
    assert found.startswith("Publish your notes") or found.startswith("[Publish] your [notes]")
    assert "[how] [to] [publish]" not in found and "how to [publish] and" in found
    assert "dendron.topic.[publish].cook > export-[notes]" in found  # shown text: Obsidian's "note > heading"
    assert "Export;" in found and "common#" not in found
    assert "https://example.com/notes_publish" in found and "https://example.com/publish." in found  # URLs unmarked
    assert "GITHUB_TOKEN for [github]" in found and "[publishing] works" in found
    assert all(url.count("[") == 0 for url in URL.findall(found))


def test_cjk_words_are_marked_where_they_stand(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "東京.md", "# 東京の生活\n\n私は**東京**に住んでいます。[[大阪|おおさか]]にも行きました。\n")
    engine.indexer.sync()
    hit = engine.searcher.search("東京", mode="fts").results[0]
    # Each CJK character is a keyword token: the snippet's 24 are 24 characters.
    assert hit.snippet == "**東京**の生活 私は**東京**に住んでいます。おおさかにも行き…"
    assert hit.heading == "" and hit.text.startswith("# 東京の生活")  # the raw passage stays in text


def test_the_heading_is_shown_only_when_it_says_more_than_the_title(make_engine, vault):
    engine = make_engine(kind="none")
    shutil.copy(REPO / "examples" / "vault" / "Sourdough.md", vault / "Sourdough.md")
    write(vault, "Plan.md", "---\ntitle: Garden plan\n---\n# [Garden plan](https://example.com/plan)\n\ntomatoes by the wall\n")
    engine.indexer.sync()
    first = engine.searcher.search("starter evening", mode="fts", per_file=False).results[0]
    assert (first.title, first.heading_path, first.heading) == ("Sourdough", "Sourdough", "")
    plan = engine.searcher.search("tomatoes wall", mode="fts", per_file=False).results[0]
    assert (plan.title, plan.heading_path, plan.heading) == ("Garden plan", "[Garden plan](https://example.com/plan)", "")
