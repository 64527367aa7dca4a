"""Markdown as a reader sees it: what snippets and the headings shown with a hit are made of."""

from __future__ import annotations

from tarsd.markdown.visible import shown_heading, visible_inline, visible_text


def test_marks_go_and_the_visible_text_stays():
    note = "\n".join(
        [
            "## Setup ##",
            "> [!tip] Before you start",
            "> quoted **bold**, *italic*, _under_, ~~gone~~ and ==marked== words",
            "- a bullet with `inline **code**`",
            "1. [ ] a task and [x] text",
            "<!-- a hidden",
            "comment over lines --> after the comment %%obsidian comment%%",
            "A <span class='x'>tag</span> &amp; an entity ^block-id",
            "---",
            "| col a | col b |",
            "|:-----:|-------|",
            "| one   | two   |",
        ]
    )
    assert visible_text(note).splitlines() == [
        "Setup",
        "Before you start",
        "quoted bold, italic, under, gone and marked words",
        "• a bullet with inline **code**",
        "1. ☐ a task and [x] text",
        " after the comment ",
        "A <span class='x'>tag</span> & an entity",  # HTML is shown as text, never rendered
        "",
        "col a | col b",
        "",
        "one | two",
    ]


def test_links_and_embeds_show_what_obsidian_shows():
    line = (
        "[the docs](https://docs.example.com/notes/a_b_(c) 'title') [[target|alias]] [[target]] [[note#Heading]] "
        "[[#Only heading]] [[note#^block1]] ![[Embedded note]] ![[diagram.png]] ![[photo.jpg|300]] ![alt text](img/x.png) "
        "[![badge](https://img.shields.io/x.svg)](https://example.com) [ref link][1] footnote[^1] <https://auto.link/x_y_z>"
    )
    assert visible_inline(line) == (
        "the docs alias target note > Heading Only heading note Embedded note alt text badge ref link footnote https://auto.link/x_y_z"
    )
    # Dendron writes [[shown text|note]], the other way round: the words are shown, not the note's name.
    assert visible_inline("[[Lookup|dendron://dendron.dendron-site/dendron.topic.lookup#create]] and [[a.b|c.d]]") == "Lookup and c.d"
    assert visible_inline("![[dendron://dendron.dendron-site/careers.mission]]") == "careers.mission"


def test_hostile_markdown():
    # Nested brackets in a link's text, parentheses in its URL, a link in an image in a link.
    assert visible_inline("[a [nested] text](https://x.org/wiki/Foo_(bar)) after") == "a [nested] text after"
    # URLs shown as text keep their underscores and asterisks: no emphasis is read inside them.
    assert visible_inline("see https://x.com/*notes*/snake_case_name and www.a_b_c.org/*x*") == (
        "see https://x.com/*notes*/snake_case_name and www.a_b_c.org/*x*"
    )
    assert visible_inline("snake_case_name stays, 2 * 3 * 4 stays, **un*closed") == "snake_case_name stays, 2 * 3 * 4 stays, **un*closed"
    assert visible_inline(r"escaped \*stars\* and \[\[not a link\]\]") == "escaped *stars* and [[not a link]]"
    assert visible_inline("[[unclosed link and ![[half, closed]] elsewhere") == "unclosed link and half, closed elsewhere"
    assert visible_inline("orphan tail](https://x.org/a_(b)) and [[a [b]]]") == "orphan tail https://x.org/a_(b) and a [b]"
    assert visible_inline("***both*** and **bold _inside_ it**") == "both and bold inside it"
    assert visible_inline("__strong__, <b>window.__pwned = 2</b> and snake__case__name") == (
        "strong, <b>window.__pwned = 2</b> and snake__case__name"  # HTML is text; no "__" inside a word
    )
    assert visible_inline("a \ue000private\ue001 character") == "a private character"


def test_code_keeps_its_text_and_an_unclosed_fence_runs_to_the_end():
    fenced = "Intro [[x]]\n```python\n# a comment, not a heading\nlink = '[[y]]'\n```\nafter **bold**"
    assert visible_text(fenced).splitlines() == ["Intro x", "# a comment, not a heading", "link = '[[y]]'", "after bold"]
    unclosed = "Intro\n~~~bash\n## kept as code\n[a](b)"  # an info string: this marker opens a fence
    assert visible_text(unclosed).splitlines() == ["Intro", "## kept as code", "[a](b)"]
    indented = "- output:\n\n    ```md\n    Hello [[John]]!\n    ```\n"
    assert visible_text(indented).splitlines() == ["• output:", "", "    Hello [[John]]!"]


def test_a_passage_that_starts_inside_a_code_block():
    # The chunker may start a passage inside a fence: its first bare marker closes it.
    passage = 'value: "x"\n```\nYou now have a **template**.\n### Next [[Apply|dendron.commands.apply]]\n```yml\nkey: 1\n```'
    assert visible_text(passage).splitlines() == ['value: "x"', "You now have a template.", "Next Apply", "key: 1"]
    # Even when the code is markdown itself (a template), the passage's fences pair up this way only.
    passage = "### What went well?\n\n```\n\n### Create the schema\n> Run [[Apply Template|dendron.templates.apply]].\n"
    assert visible_text(passage).splitlines() == ["### What went well?", "", "", "Create the schema", "Run Apply Template."]
    # And it may end inside one: a heading and a list before a fence are not code.
    passage = "### 1st Run\n1. Restore the cache\n    ```\n    Cache not found\n    ```\n2. Install\n    ```\n    npm ci"
    assert visible_text(passage).splitlines() == ["1st Run", "1. Restore the cache", "    Cache not found", "2. Install", "    npm ci"]


def test_cjk_text_is_kept():
    assert visible_text("## 東京の**天気**\n[[東京|とうきょう]]に住んでいます。") == "東京の天気\nとうきょうに住んでいます。"


def test_the_heading_shown_says_more_than_the_title():
    assert shown_heading("Sourdough", "Sourdough") == ""
    assert shown_heading("Sourdough", "Sourdough > Bake") == "Bake"
    assert shown_heading("Sourdough", "Intro > Bake") == "Intro > Bake"
    assert shown_heading("Lookup", "[Lookup](https://handbook.dendron.so/notes/b89.html#lookup)") == ""
    assert shown_heading("Schema Template", "[[Variable Substitution|dendron.topic.templates#variable-substitution]]") == (
        "Variable Substitution"
    )
    assert shown_heading("tars", "") == "" and shown_heading("", "**Setup**") == "Setup"
