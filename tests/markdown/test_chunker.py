"""Chunking: scored break points, fences, exact line numbers, and the token budget."""

from __future__ import annotations

import random
import string
import textwrap

import pytest

from harness.paths import DENDRON
from tarsd.markdown.chunker import MAX_CHARS_PER_TOKEN, MAX_NAME_CHARS, HeuristicCounter, chunk_note, parse_front_matter


def lines_of(text: str, chunk) -> str:
    return "\n".join(text.splitlines()[chunk.start_line - 1 : chunk.end_line])


def paragraph(words: int, word: str = "lorem") -> str:
    return " ".join(f"{word}{i % 7}" for i in range(words))


@pytest.fixture(params=["wordpiece", "heuristic"])
def counter(request):
    """Each token counter a note can be chunked with: the model's tokenizer, or the estimate."""
    return request.getfixturevalue("wordpiece") if request.param == "wordpiece" else HeuristicCounter()


def line_in_chunks(chunks, number: int) -> str:
    """What the chunks hold of one line, put together in order (meant for chunks without overlap)."""
    return "".join(c.text.split("\n")[number - c.start_line] for c in chunks if c.start_line <= number <= c.end_line)


def assert_within_bounds(note, counter, budget: int, where: str = "") -> None:
    """Every chunk within the token budget (as counted and counted again) and the character bound."""
    for chunk in note.chunks:
        assert chunk.tokens <= budget and counter.count([chunk.embed_text])[0] <= budget, f"{where} chunk {chunk.seq}"
        assert len(chunk.embed_text) <= budget * MAX_CHARS_PER_TOKEN, f"{where} chunk {chunk.seq}"


def test_chunk_text_is_exactly_its_lines(wordpiece):
    text = textwrap.dedent(
        """\
        ---
        title: Gardening
        tags: [plants, outdoors]
        ---
        # Gardening

        Tomatoes need sun.

        ## Watering

        Water in the morning.
        """
    )
    note = chunk_note(text, wordpiece, budget=254)
    assert note.title == "Gardening"
    assert note.tags == ["plants", "outdoors"]
    assert len(note.chunks) == 1
    chunk = note.chunks[0]
    assert (chunk.start_line, chunk.end_line) == (5, 11)
    assert chunk.text == lines_of(text, chunk)
    assert "title:" not in chunk.embed_text  # front matter is not embedded as raw YAML


def test_every_chunk_fits_the_budget_and_matches_its_lines(wordpiece):
    notes = sorted(DENDRON.glob("*.md"))[:150]
    assert notes, f"no notes in {DENDRON}"
    for path in notes:
        text = path.read_text(encoding="utf-8", errors="replace")
        for chunk in chunk_note(text, wordpiece, budget=120).chunks:
            assert wordpiece.count([chunk.embed_text])[0] <= 120, path
            # Exactly its lines; a line too long for one chunk may be split, so the first and
            # last line can be partial: the text is then a contiguous part of its lines.
            assert chunk.text in lines_of(text, chunk), path


def test_prefers_a_heading_over_a_blank_line_near_the_limit(wordpiece):
    text = "\n".join(["# Top", "", paragraph(40), "", "## Second", "", paragraph(30), "", paragraph(30)])
    note = chunk_note(text, wordpiece, budget=130, overlap=0)
    # The heading lies well before the limit, yet wins over the later blank line.
    assert note.chunks[1].text.startswith("## Second")
    assert note.chunks[1].heading_path == "Top > Second"


def test_never_cuts_inside_a_code_fence(wordpiece):
    fence = ["```python", *[f"value_{i} = compute({i})" for i in range(12)], "```"]
    text = "\n".join(["# Code", "", paragraph(60), "", *fence, "", paragraph(20)])
    note = chunk_note(text, wordpiece, budget=140, overlap=0)
    for chunk in note.chunks:
        assert chunk.text.count("```") % 2 == 0, chunk.text
    assert any("value_0" in c.text and "value_11" in c.text for c in note.chunks)


def test_a_fence_larger_than_the_budget_is_split_rather_than_truncated(wordpiece):
    fence = ["```", *[f"line {i} of a very long listing with words" for i in range(80)], "```"]
    text = "\n".join(fence)
    note = chunk_note(text, wordpiece, budget=60)
    assert len(note.chunks) > 1
    assert all(c.tokens <= 60 for c in note.chunks)
    covered = set()
    for c in note.chunks:
        covered.update(range(c.start_line, c.end_line + 1))
    assert covered == set(range(1, len(fence) + 1))  # nothing dropped


def test_overlong_line_is_split_into_pieces_that_fit(wordpiece):
    text = "intro\n\n" + paragraph(900) + "\n\noutro"
    note = chunk_note(text, wordpiece, budget=100, overlap=0)
    assert len(note.chunks) > 5 and all(c.tokens <= 100 for c in note.chunks)
    assert sum(1 for c in note.chunks if c.start_line == c.end_line == 3) > 3
    # Nothing lost or repeated: the chunks put together are the note, whitespace aside.
    assert "".join("".join(c.text for c in note.chunks).split()) == "".join(text.split())


def test_giant_word_without_spaces_fits(wordpiece):
    blob = "".join(f"{i:x}" for i in range(5000))
    note = chunk_note(f"# Blob\n\n{blob}\n", wordpiece, budget=64)
    assert note.chunks and all(c.tokens <= 64 for c in note.chunks)


def test_overlap_repeats_the_end_of_the_previous_chunk(wordpiece):
    lines = [f"- item {i} " + paragraph(8, "word") for i in range(60)]
    note = chunk_note("\n".join(lines), wordpiece, budget=100, overlap=0.2)
    assert len(note.chunks) > 2
    for first, second in zip(note.chunks, note.chunks[1:], strict=False):
        assert second.start_line <= first.end_line  # shared lines
        assert second.start_line > first.start_line  # but always progress


def test_no_overlap_after_a_heading(wordpiece):
    text = "\n".join(["# One", paragraph(50), "# Two", paragraph(50)])
    note = chunk_note(text, wordpiece, budget=70, overlap=0.5)
    two = next(c for c in note.chunks if c.text.startswith("# Two"))
    assert two.start_line == 3


def test_context_line_carries_title_and_parent_headings(wordpiece):
    text = "\n".join(["---", "title: Trip", "---", "## Plan", paragraph(80), "", "### Day one", paragraph(80)])
    note = chunk_note(text, wordpiece, budget=100, overlap=0)
    day_one = next(c for c in note.chunks if c.text.startswith("### Day one"))
    assert day_one.embed_text.startswith("Trip > Plan\n\n### Day one")
    assert day_one.heading_path == "Plan > Day one"


def test_title_falls_back_to_h1_then_file_name(wordpiece):
    assert chunk_note("# Heading title\n\ntext", wordpiece, 254, fallback_title="file").title == "Heading title"
    assert chunk_note("just text", wordpiece, 254, fallback_title="file").title == "file"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("---\ntitle: A\naliases: [B, C]\n---\nbody", ({"title": "A", "aliases": ["B", "C"]}, 4)),
        ("---\n: : bad yaml [\n---\nbody", ({}, 3)),  # invalid YAML is still skipped as front matter
        ("---\nnever closed\nbody", ({}, 0)),
        ("no front matter", ({}, 0)),
    ],
)
def test_front_matter(text, expected):
    assert parse_front_matter(text.splitlines()) == expected


def test_nested_yaml_aliases_in_front_matter_are_not_printed(wordpiece):
    # Seven levels of nine aliases: 4.8 million "lol"s, printed 34 MB as a tag (each level more is 9 times that).
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 7)]
    text = "\n".join(["---", *levels, "title: *a6", "tags: [real, *a6]", "aliases: *a6", "---", "body"])
    note = chunk_note(text, wordpiece, budget=254, fallback_title="file")
    assert (note.title, note.tags, note.aliases) == ("file", ["real"], [])
    assert [c.text for c in note.chunks] == ["body"]


@pytest.mark.parametrize("value, expected", [("0", "0"), ("2024", "2024"), ("'0.10'", "0.10")])
def test_a_scalar_title_is_kept_whatever_its_type(wordpiece, value, expected):
    assert chunk_note(f"---\ntitle: {value}\n---\nbody", wordpiece, 254, fallback_title="file").title == expected


def test_empty_and_blank_notes_have_no_chunks(wordpiece):
    assert chunk_note("", wordpiece, 254).chunks == []
    assert chunk_note("\n\n  \n", wordpiece, 254).chunks == []
    assert chunk_note("---\ntitle: x\n---\n", wordpiece, 254).chunks == []


def test_heuristic_counter_errs_high_on_typical_notes(wordpiece):
    texts = [p.read_text(encoding="utf-8") for p in sorted(DENDRON.glob("*.md"))[:200]]
    ratios = sorted(e / r for e, r in zip(HeuristicCounter().count(texts), wordpiece.count(texts), strict=True) if r > 20)
    assert ratios[len(ratios) // 2] > 1.1


FRONT_MATTER_NOTE = "---\ntitle: Front\ntags: [alpha, beta]\naliases: [Other name]\n---\n# Heading\n\nBody text.\n\n## Part\n\nMore text.\n"


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff" + FRONT_MATTER_NOTE,
        FRONT_MATTER_NOTE.replace("\n", "\r\n"),
        "\ufeff" + FRONT_MATTER_NOTE.replace("\n", "\r\n"),
    ],
    ids=["bom", "crlf", "bom-crlf"],
)
def test_front_matter_after_a_bom_or_with_crlf_line_ends(wordpiece, text):
    note = chunk_note(text, wordpiece, budget=254)
    assert (note.title, note.tags, note.aliases) == ("Front", ["alpha", "beta"], ["Other name"])
    assert [(c.start_line, c.end_line, c.heading_path) for c in note.chunks] == [(6, 12, "Heading")]
    chunk = note.chunks[0]
    assert chunk.text == "# Heading\n\nBody text.\n\n## Part\n\nMore text."  # no BOM, no \r, no YAML
    assert chunk.embed_text == f"Front\n\n{chunk.text}"


def test_a_bom_before_the_first_heading_does_not_hide_it(wordpiece):
    note = chunk_note("\ufeff# Title\r\n\r\ntext\r\n", wordpiece, budget=254, fallback_title="file")
    assert note.title == "Title"
    assert note.chunks[0].heading_path == "Title"
    assert note.chunks[0].text == "# Title\n\ntext"


# Lines no tokenizer counts fairly: WordPiece reads any word over 100 characters as one [UNK] and
# whitespace or U+FFFD as nothing, so only a character bound keeps their chunks small.
HOSTILE_LINES = {
    "no-spaces": lambda rng, n: "".join(rng.choices(string.ascii_letters + string.digits, k=n)),
    "random-words": lambda rng, n: " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(1, 14))) for _ in range(n // 8)),
    "cjk": lambda rng, n: "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(n // 3)),
    "emoji": lambda rng, n: "".join(chr(rng.randint(0x1F300, 0x1F64F)) for _ in range(n // 4)),
    "url-like": lambda rng, n: "/".join("".join(rng.choices(string.ascii_lowercase + "?=&-.", k=9)) for _ in range(n // 10)),
    "padded": lambda rng, n: "x" + " " * n + "y",
}


def test_a_megabyte_line_without_spaces_is_cut_within_the_budget_and_the_character_bound(counter):
    # The reproduction (5 MB there, measured by bench/index_chunk_hostile.py): once one chunk, "1 token" to WordPiece.
    line = HOSTILE_LINES["no-spaces"](random.Random(5), 1_000_000)
    note = chunk_note(line, counter, budget=254, overlap=0)
    assert_within_bounds(note, counter, 254)
    assert all(c.start_line == c.end_line == 1 for c in note.chunks)
    assert line_in_chunks(note.chunks, 1) == line


@pytest.mark.parametrize("shape", HOSTILE_LINES)
def test_hostile_long_lines_are_cut_within_bounds_and_join_back(counter, shape):
    line = HOSTILE_LINES[shape](random.Random(1), 300_000)
    text = f"# Hostile\n\n{line}\n\nafter"
    note = chunk_note(text, counter, budget=254, overlap=0)
    assert_within_bounds(note, counter, 254)
    assert (note.chunks[0].start_line, note.chunks[-1].end_line) == (1, 5)
    assert all(c.start_line == c.end_line == 3 for c in note.chunks[1:-1])
    # Pieces of whitespace alone are never a chunk of their own: the padded line is checked without them.
    rebuilt = line_in_chunks(note.chunks, 3)
    assert rebuilt == line if shape != "padded" else rebuilt.split() == line.split()


def test_a_long_line_keeps_its_line_numbers_among_others(counter):
    line = HOSTILE_LINES["no-spaces"](random.Random(2), 20_000)
    text = "\n".join(["# Top", "", paragraph(30), "", line, "", "## Next", paragraph(30)])
    note = chunk_note(text, counter, budget=64)
    assert_within_bounds(note, counter, 64)
    for chunk in note.chunks:
        assert chunk.text in lines_of(text, chunk)
    assert sum(1 for c in note.chunks if c.start_line == c.end_line == 5) > 1
    assert note.chunks[-1].end_line == 8
    assert all(c.heading_path == "Top > Next" for c in note.chunks if c.start_line >= 7)


def test_lines_of_no_tokens_make_chunks_within_the_character_bound(counter):
    # Invalid UTF-8 read with U+FFFD: WordPiece counts none, so tokens alone never end a chunk.
    text = "\n".join(["start", *["\ufffd" * 9] * 20_000, "end"])
    note = chunk_note(text, counter, budget=64)
    assert_within_bounds(note, counter, 64)
    # The overlap is held in characters too: a line is in at most two chunks, not in hundreds.
    seen: dict[int, int] = {}
    for chunk in note.chunks:
        for line in range(chunk.start_line, chunk.end_line + 1):
            seen[line] = seen.get(line, 0) + 1
    assert max(seen.values()) <= 2 and set(seen) == set(range(1, 20_003))


def test_empty_lines_count_toward_the_character_bound(counter):
    # 640 characters for a budget of 64: two words and the 500 line ends between them fit, three do not.
    text = ("word" + "\n" * 500) * 40
    note = chunk_note(text, counter, budget=64, overlap=0)
    assert_within_bounds(note, counter, 64)
    assert [c.text.split() for c in note.chunks] == [["word", "word"]] * 20
    assert [(c.start_line, c.end_line) for c in note.chunks] == [(n, n + 500) for n in range(1, 40 * 500, 1000)]


def test_a_giant_heading_is_cut_short_where_it_names_a_section(counter):
    heading = "# " + "# " * 100_000 + "x"
    note = chunk_note(f"{heading}\n\ntext under it", counter, budget=254)
    assert_within_bounds(note, counter, 254)
    assert note.title.startswith("# # #") and len(note.title) == MAX_NAME_CHARS
    assert all(len(c.heading_path) == MAX_NAME_CHARS for c in note.chunks)
    assert note.chunks[-1].text.endswith("x\n\ntext under it")


def test_a_context_too_long_in_characters_is_left_out(counter):
    # Three headings of 300 characters (as cut) make a context of 906: more than a quarter of
    # the 2,540 a chunk may hold, though WordPiece counts each as a single [UNK].
    names = [HOSTILE_LINES["no-spaces"](random.Random(level), 1_000) for level in range(1, 4)]
    text = "\n".join([*(f"{'#' * level} {name}" for level, name in enumerate(names, 1)), paragraph(300)])
    note = chunk_note(text, counter, budget=254)
    assert_within_bounds(note, counter, 254)
    under = [c for c in note.chunks if c.start_line == 4]
    assert len(under) > 1
    for chunk in under:
        assert chunk.heading_path == " > ".join(name[:MAX_NAME_CHARS] for name in names)
        assert chunk.embed_text == chunk.text


def test_counts_of_lines_never_add_up_to_less_than_their_chunk(counter):
    # The heuristic once halved the bytes of non-ASCII text per line, rounding down: 254
    # lines of "é" added up to 254 tokens but were 381 together.
    note = chunk_note("\n".join(["é"] * 600), counter, budget=254, overlap=0)
    assert_within_bounds(note, counter, 254)


POOL = [
    lambda rng: paragraph(rng.randint(1, 60), rng.choice(["word", "été", "ab"])),
    lambda rng: "#" * rng.randint(1, 6) + " " + paragraph(rng.randint(0, 5)),
    lambda rng: "",
    lambda rng: "```",
    lambda rng: "- " + paragraph(rng.randint(1, 10)),
    lambda rng: "\ufffd" * rng.randint(1, 300),
    lambda rng: "a\u0301" * rng.randint(1, 500),  # combining accents: stripped by WordPiece
    *[lambda rng, make=make: make(rng, rng.randint(1, 6_000)) for make in HOSTILE_LINES.values()],
]


@pytest.mark.parametrize("seed", range(12))
def test_random_notes_keep_every_invariant(counter, seed):
    rng = random.Random(seed)
    budget = rng.choice([16, 40, 100, 254])
    lines = ["intro", *(rng.choice(POOL)(rng) for _ in range(rng.randint(1, 60)))]
    text = "\n".join(lines)
    note = chunk_note(text, counter, budget=budget, overlap=0)
    assert_within_bounds(note, counter, budget, f"seed {seed}")
    for chunk in note.chunks:
        assert chunk.text in "\n".join(lines[chunk.start_line - 1 : chunk.end_line]), f"seed {seed}"
    # Nothing lost, nothing repeated: the chunks put together are the note, whitespace aside.
    assert "".join("".join(c.text for c in note.chunks).split()) == "".join(text.split()), f"seed {seed}"
