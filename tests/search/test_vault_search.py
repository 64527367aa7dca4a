"""Search that knows an Obsidian vault: titles, links and backlinks, tags and dates, every
language, scores on meaningful bands, results that do not depend on the limit, --explain.
Real SQLite + FTS5, the real model, real temp vaults."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from harness.paths import DENDRON, REPO
from harness.vault_files import write
from tarsd.config.settings import load_config
from tarsd.markdown.links import Link, Resolver, _NameTable, parse_links
from tarsd.markdown.tags import parse_tags
from tarsd.search.engine import Engine
from tarsd.store.database import Filter


def paths(engine, query, mode="fts", **options):
    return [r.path for r in engine.searcher.search(query, mode=mode, **options).results]


# ---- links: parsing and resolution ----


def test_links_are_parsed_outside_code_in_every_form():
    lines = [
        "See [[Alpha]], [[beta|the second]], [[gamma#Setup]], [[delta#^block1]] and ![[Embedded Note]].",
        "A markdown link [text](sub/epsilon.md#part) and <x> [spaced](<../other/zeta note.md>), [web](https://example.com/a.md).",
        "An image ![[diagram.png]] and [pdf](paper.pdf) are not notes; `[[in inline code]]` is not a link.",
        "```",
        "[[in a code block]]",
        "```",
        "[[#A heading here]] points into this very note.",
    ]
    found = parse_links(lines, 1, "notes/source.md")
    summary = [(link.line, link.kind, link.target, link.heading, link.label) for link in found]
    assert summary == [
        (1, "wiki", "Alpha", "", ""),
        (1, "wiki", "beta", "", "the second"),
        (1, "wiki", "gamma", "Setup", ""),
        (1, "wiki", "delta", "^block1", ""),
        (1, "embed", "Embedded Note", "", ""),
        (2, "markdown", "notes/sub/epsilon.md", "part", "text"),
        (2, "markdown", "other/zeta note.md", "", "spaced"),
        (7, "wiki", "", "A heading here", ""),
    ]


def test_links_resolve_the_way_obsidian_does():
    notes = ["Alpha.md", "projects/Plan.md", "archive/Plan.md", "projects/deep/Notes.md", "a/b/Target.md", "People/Sam Smith.md"]
    resolver = Resolver(notes, {"People/Sam Smith.md": ["Sam", "S. Smith"]})

    def resolve(target: str, source: str, label: str = "") -> str | None:
        return resolver.resolve(Link(1, "wiki", target, label=label), source)

    assert resolve("alpha", "x.md") == "Alpha.md"  # case-insensitive
    assert resolve("Alpha.md", "x.md") == "Alpha.md"
    # Two notes named Plan: the one nearest the linking note wins.
    assert resolve("Plan", "projects/deep/Notes.md") == "projects/Plan.md"
    assert resolve("Plan", "archive/old.md") == "archive/Plan.md"
    assert resolve("b/Target", "x.md") == "a/b/Target.md"  # a path suffix
    assert resolve("Sam", "x.md") == "People/Sam Smith.md"  # an alias
    assert resolve("Nobody", "x.md") is None
    assert resolve("shown text", "x.md", label="Alpha") == "Alpha.md"  # Dendron's [[label|note]] order
    assert resolver.resolve(Link(1, "markdown", "a/b/Target.md", exact=True), "x.md") == "a/b/Target.md"
    assert resolver.resolve(Link(1, "markdown", "a/Target.md", exact=True), "x.md") is None


def test_a_name_is_checked_not_only_its_hash():
    """The resolver finds names by their hash: two names with one hash must not mix up notes."""
    resolver = Resolver(["a.md", "b.md", "c.md"], {"c.md": ["Sea"]})
    # What a hash shared by "b" and "a" would give: the tables answer note 0 ("a.md") for "b".
    resolver._by_key = resolver._by_name = resolver._by_alias = _NameTable(["b", "sea"], [0, 0])
    assert resolver.resolve(Link(1, "wiki", "b"), "x.md") is None
    assert resolver.resolve(Link(1, "wiki", "Sea"), "x.md") is None
    assert resolver.resolve(Link(1, "markdown", "b.md", exact=True), "x.md") is None


def test_two_paths_that_differ_only_in_case_resolve_to_the_same_one_every_time():
    """Links compare without case, so such paths have one key: the last note given answers to it."""
    resolver = Resolver(["Notes/Plan.md", "notes/plan.md"], {})
    assert resolver.resolve(Link(1, "wiki", "notes/plan"), "x.md") == "notes/plan.md"
    assert resolver.resolve(Link(1, "wiki", "PLAN"), "Notes/x.md") == "notes/plan.md"
    assert resolver.resolve(Link(1, "markdown", "Notes/Plan.md", exact=True), "x.md") == "notes/plan.md"


def test_a_front_matter_title_is_a_name_and_a_file_name_wins(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "dendron.topic.lookup.md", "---\ntitle: Lookup\naliases: [Finder]\n---\nFind notes by name.\n")
    write(vault, "links.md", "See [[Lookup]] and [[finder]].\n")
    engine.indexer.sync()
    graph = engine.graph
    assert graph.find_note("Lookup") == graph.find_note("finder") == "dendron.topic.lookup.md"
    assert [link.resolved for link in graph.links_from("links.md")] == ["dendron.topic.lookup.md"] * 2
    assert [(link.source, link.target) for link in graph.links_to("dendron.topic.lookup.md")] == [
        ("links.md", "Lookup"),
        ("links.md", "finder"),
    ]
    assert graph.unresolved() == []

    write(vault, "Lookup.md", "# Lookup\n")  # a file named Lookup: its name wins over the other note's title
    engine.indexer.sync()
    assert graph.find_note("Lookup") == "Lookup.md" and graph.find_note("Finder") == "dendron.topic.lookup.md"
    assert [link.resolved for link in graph.links_from("links.md")] == ["Lookup.md", "dendron.topic.lookup.md"]


def test_every_thread_shares_one_resolver_until_a_commit(make_engine, vault):
    """The daemon answers on several worker threads: they share one resolver (one per thread held
    31 MB each at 100,000 notes), and a note indexed on another thread is found on all of them."""
    from concurrent.futures import ThreadPoolExecutor

    engine = make_engine(kind="none")
    write(vault, "a.md", "# A\n")
    engine.indexer.sync()
    graph = engine.graph
    with ThreadPoolExecutor(3) as pool:
        resolvers = list(pool.map(lambda _: graph.resolver(), range(6)))
        assert all(r is resolvers[0] for r in resolvers) and graph.resolver() is resolvers[0]
        assert pool.submit(graph.find_note, "b").result() is None
        pool.submit(lambda: (write(vault, "b.md", "---\ntitle: Bee\n---\n"), engine.indexer.sync())).result()
        assert graph.find_note("b") == graph.find_note("Bee") == "b.md"  # indexed on a pool thread
        assert {pool.submit(graph.find_note, "Bee").result() for _ in range(6)} == {"b.md"}
        assert graph.resolver() is not resolvers[0]


def test_inline_tags_are_read_like_obsidian():
    lines = ["#project/tars and #idea, not #123 or `#code`", "# A heading", "url https://x.org/#anchor", "```", "#inside", "```"]
    assert parse_tags(lines) == ["project/tars", "idea"]


# ---- an engine on a temp vault, without the model ----


def test_a_note_with_only_a_title_is_found_by_it(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "link-to-files.md", "---\ntitle: Link to Files\ndesc: How to link to a file in the vault\n---\n")
    write(vault, "empty.md", "")
    write(vault, "other.md", "# Other\n\nThis note talks about files and links, and links again to files.\n")
    engine.indexer.sync()
    assert paths(engine, "Link to Files")[0] == "link-to-files.md"
    assert paths(engine, "empty")[0] == "empty.md"  # by its file name
    hit = engine.searcher.search("Link to Files", mode="fts").results[0]
    assert hit.text.startswith("Link to Files") and hit.start_line == 1


def test_a_title_match_weighs_more_than_a_body_match(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "Sourdough.md", "# Sourdough\n\nFeed the starter every day.\n")
    write(vault, "baking.md", "# Baking\n\nBread, cakes, and one sourdough loaf among many other bakes.\n")
    engine.indexer.sync()
    assert paths(engine, "sourdough") == ["Sourdough.md", "baking.md"]


def test_backlinks_follow_edits_and_renames(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "hub.md", "# Hub\n\nSee [[Topic]] and [[Later]].\n")
    write(vault, "Topic.md", "# Topic\n")
    engine.indexer.sync()
    graph = engine.graph
    assert [(link.source, link.line) for link in graph.links_to("Topic.md")] == [("hub.md", 3)]
    assert [link.resolved for link in graph.links_from("hub.md")] == ["Topic.md", None]  # Later does not exist yet
    assert {link.target for link in graph.unresolved()} == {"Later"}

    write(vault, "Later.md", "# Later\n")  # the unresolved link now resolves
    write(vault, "second.md", "Also about [[topic|the topic]].\n")
    engine.indexer.sync()
    assert graph.unresolved() == []
    assert sorted(link.source for link in graph.links_to("Topic.md")) == ["hub.md", "second.md"]

    write(vault, "hub.md", "# Hub\n\nNo links any more.\n")  # the linking note changes
    os.rename(vault / "Topic.md", vault / "Renamed.md")  # and the target is renamed
    engine.indexer.sync()
    assert graph.links_to("Renamed.md") == []  # [[topic]] in second.md no longer leads anywhere
    assert [link.target for link in graph.unresolved()] == ["topic"]


def test_tag_and_date_filters(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "a.md", "---\ntags: [project/tars, idea]\n---\ntomatoes\n")
    write(vault, "b.md", "Some #project notes about tomatoes\n")
    write(vault, "c.md", "#idea for tomatoes, nothing else\n")
    old = time.time() - 30 * 86400
    os.utime(vault / "c.md", (old, old))
    engine.indexer.sync()
    assert sorted(paths(engine, "tomatoes", where=Filter(tags=("project",)))) == ["a.md", "b.md"]  # nested tags count
    assert paths(engine, "tomatoes", where=Filter(tags=("project/tars",))) == ["a.md"]
    assert sorted(paths(engine, "tomatoes", where=Filter(tags=("idea",)))) == ["a.md", "c.md"]
    assert paths(engine, "tomatoes", where=Filter(tags=("project", "idea"))) == ["a.md"]  # all of them
    week = int((time.time() - 7 * 86400) * 1e9)
    assert sorted(paths(engine, "tomatoes", where=Filter(since_ns=week))) == ["a.md", "b.md"]
    assert paths(engine, "tomatoes", where=Filter(before_ns=week)) == ["c.md"]


def test_words_in_every_language_are_found(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "ja.md", "私は東京に住んでいます。日本語の勉強をしています。\n")
    write(vault, "zh.md", "这是我的笔记，关于北京的旅行。\n")
    write(vault, "ko.md", "서울에서 친구를 만났습니다.\n")
    write(vault, "fr.md", "Un café près de la forêt, déjà fermé.\n")
    write(vault, "en.md", "A plain English note about Tokyo.\n")
    engine.indexer.sync()
    assert paths(engine, "東京") == ["ja.md"]
    assert paths(engine, "日本語") == ["ja.md"]
    assert paths(engine, "笔记") == ["zh.md"]
    assert paths(engine, "北京") == ["zh.md"]
    assert paths(engine, "서울") == ["ko.md"]
    assert paths(engine, "京都") == []  # its characters apart are not the word
    for query in ("café", "cafe", "foret", "forêt", "deja"):
        assert paths(engine, query) == ["fr.md"], query
    snippet = engine.searcher.search("東京", mode="fts").results[0].snippet
    assert "**東京**" in snippet or "**東**" in snippet and "住んで" in snippet


def test_keyword_scores_are_not_capped_when_vectors_are_missing(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "garden.md", "# Garden\n\nTomatoes want six hours of sun and deep watering.\n")
    write(vault, "other.md", "# Other\n\nNothing about plants here at all, only water.\n")
    engine.indexer.sync()
    top = engine.searcher.search("tomatoes sun watering", mode="hybrid").results[0]
    assert top.path == "garden.md" and top.band in ("relevant", "kinda")


# ---- with the model, on a slice of the Dendron vault ----


@pytest.fixture(scope="module")
def dendron(tmp_path_factory, model_dir):
    """About 150 Dendron notes, indexed with the real model once for the tests below."""
    root = tmp_path_factory.mktemp("dendron")
    vault = root / "vault"
    vault.mkdir()
    chosen = sorted(DENDRON.glob("dendron.topic.*.md"))[:120] + sorted(DENDRON.glob("dendron.guides.*.md"))[:30]
    for note in chosen:
        shutil.copy(note, vault / note.name)
    config_file = root / "config.toml"
    config_file.touch()
    settings = {"vault_path": vault, "index_db_path": root / "index.sqlite3", "embedder_kind": "local", "embedder_model_dir": model_dir}
    engine = Engine(load_config(path=config_file, env={}, **settings))
    engine.indexer.sync()
    yield engine
    engine.close()


@pytest.mark.parametrize("query", ["how do I move a note without breaking links", "lookup", "publish my notes to github pages", "xyz"])
def test_the_first_hits_do_not_depend_on_the_limit(dendron, query):
    for n in (1, 3, 10):
        few = [(r.path, r.score) for r in dendron.searcher.search(query, mode="hybrid", limit=n).results]
        many = [(r.path, r.score) for r in dendron.searcher.search(query, mode="hybrid", limit=100).results]
        assert few == many[:n]


def test_nonsense_queries_score_only_not_or_maybe(dendron):
    for query in ("zzzxqjkw", "qwerty asdf zxcv", "flibbertigibbet wombat"):
        results = dendron.searcher.search(query, mode="hybrid", limit=20).results
        assert results and {r.band for r in results} <= {"not", "maybe"}, (query, [(r.path, r.score) for r in results[:3]])
        vec = dendron.searcher.search(query, mode="vec", limit=5).results
        assert {r.band for r in vec} <= {"not", "maybe"}, query


def test_a_note_both_searches_put_first_leads_and_is_kinda_at_least(dendron):
    """Two independent judgements agreeing lead the list, and count for much in its chance of being
    relevant (tarsd/search/bands.py); not relevant by rule: on SciFact such hits were relevant 0.79-0.83
    of the time, below the band's promise (issue 44)."""
    found = 0
    for query in ("schema templates", "note references", "lookup", "hooks", "publishing"):
        results = dendron.searcher.search(query, mode="hybrid", limit=10, explain=True).results
        both = [r for r in results if r.explain.keyword_rank == 1 and r.explain.vector_rank == 1]
        if both:
            found += 1
            named = [r for r in results if r.explain.named]  # a note the query names leads even so
            assert results[len(named) if both[0] not in named else 0] is both[0] and both[0].band in ("kinda", "relevant"), query
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True), query
    assert found >= 2  # the property is exercised, not vacuous


def test_explain_gives_every_signal(dendron):
    result = dendron.searcher.search("configure the lookup modifiers", mode="hybrid", limit=5, explain=True).results[0]
    why = result.explain
    assert why.keyword_rank >= 1 and why.bm25 > 0 and 0 < why.coverage <= 1
    assert why.vector_rank >= 1 and 0 < why.cosine <= 1 and why.fused > 0
    assert 0 <= why.title_coverage <= 1 and why.linked_from >= 0
    plain = dendron.searcher.search("configure the lookup modifiers", mode="hybrid", limit=5).results[0]
    assert plain.explain is None and plain.path == result.path


def test_related_notes_mark_the_linked_ones(dendron):
    note = "dendron.topic.lookup.md"
    related = dendron.graph.related(note, limit=8)
    assert related and note not in [n.path for n in related]
    assert all(0 < n.similarity <= 1 for n in related)
    linked = {link.resolved for link in dendron.graph.links_from(note)} | {link.source for link in dendron.graph.links_to(note)}
    assert [n.linked for n in related] == [n.path in linked for n in related]
    assert any(n.path.startswith("dendron.topic.lookup") for n in related[:3])


def test_the_vector_index_follows_commits_and_rollbacks(make_engine, vault):
    engine = make_engine()
    for name in ("a", "b", "c"):
        write(vault, f"{name}.md", f"# Note {name}\n\nSomething about the letter {name}.\n")
    engine.indexer.sync()
    store = engine.store
    vectors = store.vector_index()
    assert len(vectors) == store.counts()["vectors"] == 3
    with store.batch() as batch:  # inside a batch, nothing shows before the commit
        batch.tick()
        store.delete_file("a.md")
        assert len(vectors) == 3
    assert len(vectors) == store.counts()["vectors"] == 2
    with pytest.raises(RuntimeError), store._writing():  # a write that fails rolls back, in memory too
        store.delete_file("b.md")
        raise RuntimeError("the write fails")
    assert len(vectors) == store.counts()["vectors"] == 2
    assert paths(engine, "letter b", mode="vec", limit=1) == ["b.md"]


# ---- the commands, on a real daemon ----


def test_front_matter_titles_and_aliases_name_notes_for_tarsctl(start_daemon, vault):
    write(vault, "dendron.topic.lookup.md", "---\ntitle: Lookup\naliases: [Finder]\n---\n# Lookup\n\nFind notes by name, see [[hub]].\n")
    write(vault, "hub.md", "# Hub\n\nStart with [[Lookup]], then [[Finder|find them]].\n")
    shutil.copy(REPO / "examples" / "vault" / "Sourdough.md", vault / "Sourdough.md")
    daemon = start_daemon(embedder="local")
    assert daemon.tarsctl("index", "--wait").returncode == 0

    out = daemon.tarsctl("links", "Lookup")  # issue 21: "no note in the index is called 'Lookup'"
    assert out.returncode == 0 and "[[hub]] -> hub.md" in out.stdout, out.stderr
    for name in ("Lookup", "finder"):
        back = daemon.tarsctl("backlinks", name)
        assert back.returncode == 0 and back.stdout.splitlines() == ["hub.md:3  [[Lookup]]", "hub.md:3  [[Finder]]  (find them)"], back
    related = daemon.tarsctl("related", "Lookup", "--json")
    assert related.returncode == 0 and "hub.md" in {json.loads(line)["path"] for line in related.stdout.splitlines()}

    # The heading is left out where it only repeats the title, in the CLI and in --json, which keeps the raw passage.
    shown = daemon.tarsctl("search", "starter evening", "--mode", "fts").stdout.splitlines()
    assert shown[0].startswith("Sourdough.md:5  Sourdough  [") and "›" not in shown[0]
    hit = json.loads(daemon.tarsctl("search", "starter evening", "--mode", "fts", "--json").stdout.splitlines()[0])
    assert (hit["heading_path"], hit["heading"]) == ("Sourdough", "") and hit["text"].startswith("# Sourdough\n")
    assert "**starter** the **evening**" in hit["snippet"] and "#" not in hit["snippet"]


def test_links_backlinks_related_filters_and_explain_from_tarsctl(start_daemon, vault):
    write(vault, "hub.md", "---\ntags: [project]\n---\n# Hub\n\nSee [[Topic]], [[Missing Note]] and [[Topic#Details|the details]].\n")
    write(vault, "Topic.md", "# Topic\n\n## Details\n\nTomatoes need sun. #garden\n")
    write(vault, "side.md", "Tomatoes again, linked to [[hub]].\n")
    old = time.time() - 10 * 86400
    os.utime(vault / "side.md", (old, old))
    daemon = start_daemon(embedder="local")
    assert daemon.tarsctl("index", "--wait").returncode == 0

    out = daemon.tarsctl("links", "hub")
    assert out.returncode == 0 and "hub.md:6  [[Topic]] -> Topic.md" in out.stdout and "unresolved: no such note" in out.stdout
    back = daemon.tarsctl("backlinks", "Topic.md")
    assert back.stdout.splitlines() == ["hub.md:6  [[Topic]]", "hub.md:6  [[Topic#Details]]  (the details)"]
    assert "[[Missing Note]]" in daemon.tarsctl("links", "--unresolved").stdout
    assert "1 leading to no note" in daemon.tarsctl("status").stdout
    missing = daemon.tarsctl("backlinks", "No Such Note")
    assert missing.returncode == 1 and "no note in the index is called" in missing.stderr

    related = daemon.tarsctl("related", "Topic", "--json")
    notes = [__import__("json").loads(line) for line in related.stdout.splitlines()]
    assert notes and {n["path"] for n in notes} <= {"hub.md", "side.md"} and {n["path"]: n["linked"] for n in notes}["hub.md"]

    assert daemon.tarsctl("search", "tomatoes", "--tag", "garden", "--mode", "fts").stdout.startswith("Topic.md:")
    recent = daemon.tarsctl("search", "tomatoes", "--since", "3d", "--mode", "fts").stdout
    assert "side.md" not in recent and "Topic.md" in recent
    assert daemon.tarsctl("search", "tomatoes", "--since", "next tuesday").returncode == 2
    why = daemon.tarsctl("search", "tomatoes sun", "--explain")
    assert "why: keyword #" in why.stdout and "cosine" in why.stdout and "fused" in why.stdout


# ---- a query that is a note's name ----


def named_vault(vault):
    """A note whose front-matter title is "Lookup" among notes that say "lookup" far more often,
    and one named by an alias, as in the Dendron vault."""
    write(vault, "dendron.topic.lookup.md", "---\ntitle: Lookup\n---\n# Overview\n\nOpen any note by typing part of its name.\n")
    write(vault, "finder.md", "---\ntitle: Finder\naliases: [Quick Find]\n---\nA palette that jumps to any place.\n")
    for n in range(5):
        write(
            vault,
            f"templates/partial-{n}.md",
            f"# Partial {n}\n\nlookup lookup: the lookup bar shows a lookup result, then lookup again.\n",
        )
    write(vault, "quick-notes.md", "# Notes\n\nquick find, quick find again: a quick way to find things quickly.\n")


@pytest.mark.parametrize("kind, mode", [("none", "fts"), ("local", "hybrid"), ("local", "fts")])
def test_a_query_that_is_a_notes_name_puts_that_note_first(make_engine, vault, kind, mode):
    named_vault(vault)
    engine = make_engine(kind=kind)
    engine.indexer.sync()
    for query, note in [
        ("Lookup", "dendron.topic.lookup.md"),  # the front-matter title
        ("lookup", "dendron.topic.lookup.md"),
        ("Quick Find", "finder.md"),  # an alias
        ("finder?", "finder.md"),  # the title, with a question mark
        ("quick-notes", "quick-notes.md"),  # the file name
    ]:
        results = engine.searcher.search(query, mode=mode, limit=5, explain=True).results
        assert results[0].path == note, (query, [r.path for r in results])
        assert results[0].band == "relevant" and results[0].explain.named, query
    others = engine.searcher.search("lookup bar", mode=mode, limit=5, explain=True).results
    assert not any(r.explain.named for r in others)  # words of a name are not the name


# ---- related notes for a note of any length ----

BAKING_STEPS = [
    "Feed the starter flour and water the evening before baking the loaf.",
    "Shape the dough into a tight boule and let it proof in a floured basket.",
    "Bake the bread in a preheated dutch oven at a high oven temperature.",
    "Score the loaf with a razor so the crust opens as it rises in the oven.",
    "Let the crumb cool on a rack for an hour before slicing the sourdough.",
    "Fold the dough every half hour to build the gluten's strength.",
    "Weigh the flour, salt and water on a kitchen scale for each batch.",
    "A wetter dough gives an open crumb; a stiffer dough is easier to shape.",
    "Keep the rye starter in the fridge and feed it once a week.",
    "Steam in the first twenty minutes of baking gives a glossy crust.",
]


def baking_note(sections: int) -> str:
    return "# Baking\n\n" + "".join(f"## Step {i % 10}\n\n{BAKING_STEPS[i % 10]}\n\n" for i in range(sections))


def test_related_on_a_10000_passage_note_lists_what_the_same_words_in_10_passages_list(start_daemon, vault):
    """Issue 37: on a note of 11,395 passages, the 100 passages nearest its mean vector were all
    its own, and related said "nothing related". Long.md is Short.md's ten steps a thousand times
    over: 10,000 passages (32-token chunks: one step each) that mean what Short.md's ten mean.

    Built cheaply but with every real part: the real model and SQLite with sqlite-vec. Long.md has
    ten distinct passages, so the model embeds those ten and the embedding cache (one vector per
    content hash, as for a vault's repeated boilerplate) gives the other 9,990 theirs: the index
    holds 10,000 passage vectors, as it would for 10,000 different paragraphs, in seconds instead
    of the 3-4 minutes 10,000 distinct passages take the model on one core."""
    write(vault, "Short.md", baking_note(10))
    write(vault, "Long.md", baking_note(10_000))
    for name in ("Sourdough.md", "Home automation.md"):
        shutil.copy(REPO / "examples" / "vault" / name, vault / name)
    write(vault, "Bread notes.md", "# Bread notes\n\nMy loaf was flat: the starter was weak and the oven not hot enough.\n")
    write(vault, "Garden.md", "# Garden\n\nTomatoes need sun, and water every morning in July.\n")
    daemon = start_daemon(embedder="local", TARS_INDEX_CHUNK_TOKENS="32")
    assert daemon.tarsctl("index", "--wait").returncode == 0
    status = json.loads(daemon.tarsctl("status", "--json").stdout)
    assert status["counts"]["vectors"] >= 10_010 and status["counts"]["pending_vectors"] == 0, status["counts"]

    def related(note: str) -> list[tuple[str, float]]:
        reply = daemon.tarsctl("related", note, "--json")
        assert reply.returncode == 0, reply.stderr
        return [(hit["path"], hit["similarity"]) for hit in map(json.loads, reply.stdout.splitlines())]

    started = time.perf_counter()
    long = related("Long")
    elapsed = time.perf_counter() - started
    short = related("Short")
    # Each lists the other first (the same text), then the same notes in the same order.
    assert long[0][0] == "Short.md" and short[0][0] == "Long.md", (long, short)
    assert [path for path, _ in long[1:]] == [path for path, _ in short[1:]], (long, short)
    # Not to the digit: the first passage (under the title) weighs a tenth in Short.md's mean, a ten-thousandth in Long.md's.
    assert [s for _, s in long[1:]] == pytest.approx([s for _, s in short[1:]], abs=0.01)
    assert {"Sourdough.md", "Bread notes.md", "Garden.md", "Home automation.md"} == {path for path, _ in long[1:]}
    assert {path for path, _ in long[1:3]} == {"Sourdough.md", "Bread notes.md"}, long  # the two about bread
    print(f"\n  related on a 10,000-passage note: {elapsed * 1000:.0f} ms for tarsctl, start-up included")


def test_related_says_why_it_lists_nothing(start_daemon, vault):
    write(vault, "A.md", "# A\n\nTomatoes need sun.\n")
    write(vault, "B.md", "# B\n\nPeppers need sun too.\n")
    daemon = start_daemon(embedder="none")  # no model: nothing gets a vector
    assert daemon.tarsctl("index").returncode == 0
    waiting = daemon.tarsctl("related", "A")
    assert waiting.returncode == 0 and waiting.stdout == ""
    assert waiting.stderr == (
        "nothing related to A.md: its 1 passage has no vector yet, and related notes are found by vectors "
        "(see `tarsctl status` for the embedder)\n"
    )


def test_related_says_when_no_other_note_has_vectors(make_engine, vault):
    write(vault, "Only.md", "# Only\n\nThe one note with any text.\n")
    engine = make_engine()
    engine.indexer.sync()
    engine.indexer.embed_pending()
    assert engine.graph.related("Only.md") == []
    assert engine.graph.why_none_related("Only.md") == "no other note has a passage with a vector to compare with"
