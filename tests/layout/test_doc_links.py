"""The README and docs/ point at each other with relative links: every one must lead to a file
that exists, and a link with a #fragment to a heading that exists there, so a page moved or a
heading renamed breaks this test rather than a reader's click. External http(s) links are not
checked (no network in the tests)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

from harness.paths import REPO

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^\s)>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, obsidian: ...


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered: a link or a '#' inside a code sample is not one."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text as shown, lowercase, with every character but
    letters, digits, '_', '-' and spaces dropped, and spaces turned into '-'."""
    shown = INLINE_CODE.sub(lambda m: m.group(2), heading)
    shown = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", shown)  # a link shows its text only
    kept = "".join(
        char for char in shown.lower() if char in " -" or unicodedata.category(char)[0] in "LMN" or unicodedata.category(char) == "Pc"
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as GitHub numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8", errors="replace")):
        if match := HEADING.match(line):
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(root: Path) -> list[str]:
    broken = []
    for page in doc_files(root):
        for number, line in prose_lines(page.read_text(encoding="utf-8", errors="replace")):
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                if EXTERNAL.match(target):
                    continue
                file_part, _, fragment = target.partition("#")
                where = (page.parent / unquote(file_part)).resolve() if file_part else page
                name = f"{page.relative_to(root)}:{number} ({target})"
                if not where.exists():
                    broken.append(f"{name} leads to no file")
                elif fragment and where.suffix == ".md" and unquote(fragment).lower() not in anchors(where):
                    broken.append(f"{name}: {where.relative_to(root)} has no heading with the anchor #{fragment}")
    return broken


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere():
    assert (REPO / "docs").is_dir() and len(doc_files(REPO)) > 2
    broken = broken_links(REPO)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_slugs_follow_github():
    assert slug("Use tars from AI tools (MCP)") == "use-tars-from-ai-tools-mcp"
    assert slug("Scale: 100,000 notes") == "scale-100000-notes"
    assert slug("`tarsctl doctor` and [the page](x.md)") == "tarsctl-doctor-and-the-page"
    assert slug("snake_case — and  more") == "snake_case--and--more"


def test_a_broken_link_or_anchor_is_found(tmp_path: Path):
    """Guards the test itself: a checker that found nothing would pass everything."""
    (tmp_path / "docs").mkdir()
    page = "# Page\n\n## Part\n\n## Part\n\n```sh\n# not a heading\n[x](nowhere.md)\n```\n"
    (tmp_path / "docs" / "a.md").write_text(page, encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#part-1) [ok](#top) [web](https://example.org/x.md)\n"
        "[gone](docs/b.md) [no heading](docs/a.md#part-2) [code](docs/a.md#not-a-heading) `[in code](nowhere.md)`\n\n# Top\n",
        encoding="utf-8",
    )
    assert broken_links(tmp_path) == [
        "README.md:2 (docs/b.md) leads to no file",
        "README.md:2 (docs/a.md#part-2): docs/a.md has no heading with the anchor #part-2",
        "README.md:2 (docs/a.md#not-a-heading): docs/a.md has no heading with the anchor #not-a-heading",
    ]


def test_the_readme_stays_short():
    """The README is the way in, at most 300 lines: reference material goes in docs/ (issue 43, item 15)."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move reference material to docs/"
