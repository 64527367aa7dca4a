"""Markdown as a reader sees it rendered, as plain text: what search snippets and the headings
shown with a hit are made of.

Heading marks, quote and callout markers, emphasis, HTML comments (and Obsidian's
``%%comments%%``), link definitions, footnote references and block ids are dropped; a
markdown link or image shows its text, a wikilink its alias (or its target, ``note > heading``
for a heading link, as Obsidian shows it), an embed the name of the note it embeds and nothing
for an attachment; list items keep a bullet or their number, tasks a box. Code keeps its text
exactly (a fence's marker lines go; an unclosed fence runs to the end, as in CommonMark), and
so do URLs shown as URLs. HTML tags stay as they are written: the result is text to show as
text, never markup to render. Lines stay lines, so a caller can join them as it needs.
"""

from __future__ import annotations

import html
import re

# Any indent: a fence inside a list item is indented as deep as the item's text.
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_LOOKS_LIKE_MARKDOWN = re.compile(r"\[\[|\]\(|^ {0,3}(?:#{2,6}[ \t]|>)")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_OBSIDIAN_COMMENT = re.compile(r"%%.*?(?:%%|\Z)", re.DOTALL)

_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|$)")
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$")
_SETEXT_OR_RULE = re.compile(r"^ {0,3}(?:=+|-{2,}|([-*_])(?:[ \t]*\1){2,})[ \t]*$")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_CALLOUT = re.compile(r"^\[!([^\]\n]+)\][+-]?[ \t]*")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:([-*+])|(\d{1,9}[.)]))[ \t]+(?:\[([ xX])\][ \t]+)?")
_TABLE_DIVIDER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S+.*$")
_BLOCK_ID = re.compile(r"[ \t]+\^[A-Za-z0-9-]+[ \t]*$")

_INLINE_CODE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]*)\]\]")
# [text](url "title"): the text may hold one level of brackets ([a [b] c]), the url one level of
# parentheses (Wikipedia's), or be <written like this>.
_LINK_TEXT = r"\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
_LINK_DESTINATION = r"\(\s*(?:<[^>\n]*>|(?:[^()\s]|\([^()\s]*\))*)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
_IMAGE = re.compile(r"!" + _LINK_TEXT + _LINK_DESTINATION)
_LINK = re.compile(_LINK_TEXT + _LINK_DESTINATION)
_REFERENCE_LINK = re.compile(_LINK_TEXT + r"\[[^\[\]\n]*\]")
_STRAY_WIKILINK = re.compile(r"!?\[\[|\]\]")
_ORPHAN_LINK_TAIL = re.compile(r"\]\(\s*((?:[^()\s]|\([^()\s]*\))*)\)?")
_FOOTNOTE_REFERENCE = re.compile(r"\[\^[^\]\s]+\](?!:)")
_AUTOLINK = re.compile(r"<((?:[a-zA-Z][a-zA-Z0-9+.-]{1,31}:|www\.)[^<>\s]*|[^<>\s@]+@[^<>\s@]+)>")
# A URL shown as text: a scheme and what follows up to a space or "**" (emphasis closing around
# it), less the punctuation that ends a sentence rather than the URL.
URL = re.compile(r"\b(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.|mailto:)(?:[^\s<>\"'`*]|\*(?!\*))*[^\s<>\"'`.,;:!?)\]}*_~]")
URL_MARKS = ("://", "www.", "mailto:")  # one of them is in every URL


def has_url(text: str) -> bool:
    return any(mark in text for mark in URL_MARKS)


# Each with the marks a match must hold: a line without them is not searched (snippets turn
# every hit's passage into text, and most lines have no emphasis).
_EMPHASIS = (
    (("**",), re.compile(r"(\*\*)(?=\S)(.+?)(?<=\S)\*\*")),
    (("__",), re.compile(r"(?<![\w\\])(__)(?=\S)(.+?)(?<=\S)__(?!\w)")),  # "_" never emphasises inside a word: window.__name__
    (("~~", "=="), re.compile(r"(~~|==)(?=\S)(.+?)(?<=\S)\1")),
    (("*",), re.compile(r"(?<![\w*\\])(\*)(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")),
    (("_",), re.compile(r"(?<![\w\\])(_)(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)")),
)
_DENDRON_VAULT = re.compile(r"^dendron://[^/]*/")
_ATTACHMENT = re.compile(r"\.(?!md$)[A-Za-z0-9]{1,5}$")
# Kept text (code, URLs) stands in a line as one of these until the line is done: no rule touches it.
_KEPT = re.compile("\ue000(\\d+)\ue001")


def visible_text(markdown: str) -> str:
    """``markdown`` as plain text, line for line (see the module's docstring)."""
    lines = markdown.splitlines()
    in_code, contradicted, left_open = _code_lines(lines, starts_in_code=False)
    if contradicted or left_open:
        # A passage cut out of a note may start inside a code block, its first bare marker
        # closing it. The chunker cuts a fence of 0-3 spaces' indent only when it is larger than
        # a passage, so a passage rarely ends inside one but often starts inside one (its
        # overlap). Read that way when the fences then pair up and CommonMark's reading has a
        # marker with an info string (which only opens a fence) inside a fence, or the first
        # marker is one the chunker respects, or that reading leaves fewer lines that look like
        # markdown in code.
        from_code, still_contradicted, still_open = _code_lines(lines, starts_in_code=True)
        first_marker = next((match for match in map(_FENCE.match, lines) if match), None)
        if not (still_contradicted or still_open) and (
            contradicted
            or first_marker is not None
            and len(first_marker.group(0)) - len(first_marker.group(1)) <= 3
            or _markdown_in_code(lines, from_code) < _markdown_in_code(lines, in_code)
        ):
            in_code = from_code
    shown: list[str] = []
    prose: list[str] = []
    for line, code in zip(lines, in_code, strict=True):
        if code is None:  # a fence's marker line
            continue
        if code:
            shown.extend(_prose_lines(prose))
            prose = []
            shown.append(line)
        else:
            prose.append(line)
    shown.extend(_prose_lines(prose))
    return "\n".join(shown)


def _markdown_in_code(lines: list[str], in_code: list[bool | None]) -> int:
    """Lines read as code that look like markdown: a link, a heading of level 2 or more (a "#"
    alone is a comment in many languages), a quote."""
    return sum(1 for line, code in zip(lines, in_code, strict=True) if code and _LOOKS_LIKE_MARKDOWN.search(line))


def in_fenced_code(lines: list[str]) -> list[bool]:
    """For each line of a whole note: whether it is inside a fenced code block (``` or ~~~), its
    fence lines included, so a ``## heading`` written there is code, not a heading."""
    found, _, _ = _code_lines(lines, starts_in_code=False)
    return [flag is not False for flag in found]


def _code_lines(lines: list[str], starts_in_code: bool) -> tuple[list[bool | None], bool, bool]:
    """For each line: True inside a code fence, False outside, None for a fence's marker line;
    whether a marker with an info string (which only opens a fence) stands inside a fence; and
    whether a fence is left open."""
    found: list[bool | None] = []
    fence = "?" if starts_in_code else ""  # "?": closed by the first bare marker of either kind
    contradicted = False
    for line in lines:
        marker = _FENCE.match(line)
        rest = line[marker.end() :].strip() if marker else ""
        if fence:
            if marker and not rest and (fence == "?" or marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence)):
                fence = ""
                found.append(None)
            else:
                contradicted = contradicted or bool(marker and rest)
                found.append(True)
        elif marker and not (marker.group(1)[0] == "`" and "`" in rest):
            fence = marker.group(1)
            found.append(None)
        else:
            found.append(False)
    return found, contradicted, bool(fence)


def visible_inline(markdown: str) -> str:
    """One line of markdown (a heading's text, a title) as plain text."""
    return " ".join(_inline(markdown).split())


def shown_heading(title: str, heading_path: str) -> str:
    """The headings a hit's passage sits under, as a reader would want them next to its title:
    visible text, without the leading headings that only repeat the title ("" when nothing is
    left). ``heading_path`` is the chunker's "Parent > Child"."""
    shown_title = visible_inline(title).casefold()
    parts = [visible_inline(part) for part in heading_path.split(" > ")] if heading_path.strip() else []
    while parts and parts[0].casefold() == shown_title:
        parts.pop(0)
    return " > ".join(part for part in parts if part)


def _prose_lines(lines: list[str]) -> list[str]:
    """Lines outside code: comments go first (they may span lines), then each line on its own."""
    if not lines:
        return []
    text = "\n".join(lines)
    if "<!--" in text:
        text = _HTML_COMMENT.sub("", text)
    if "%%" in text:
        text = _OBSIDIAN_COMMENT.sub("", text)
    return [_line(line) for line in text.split("\n")]


def _line(line: str) -> str:
    if _SETEXT_OR_RULE.match(line) or "|" in line and _TABLE_DIVIDER.match(line) or _LINK_DEFINITION.match(line):
        return ""
    quoted = _QUOTE.match(line)
    if quoted:
        line = line[quoted.end() :]
        callout = _CALLOUT.match(line)
        if callout:
            line = line[callout.end() :] or callout.group(1).strip().capitalize()
    heading = _HEADING.match(line)
    if heading:
        line = _CLOSING_HASHES.sub("", line[heading.end() :]).rstrip("#").rstrip()
    bullet = ""
    item = _LIST_ITEM.match(line)
    if item:
        indent, mark, number, box = item.groups()
        bullet = indent + (number or "•") + " " + ("" if box is None else "☐ " if box == " " else "☑ ")
        line = line[item.end() :]
    if "^" in line:
        line = _BLOCK_ID.sub("", line)
    if line.lstrip().startswith("|") or line.rstrip().endswith("|") and line.count("|") > 1:
        line = " | ".join(cell.strip() for cell in line.strip().strip("|").split("|"))
    return bullet + _inline(line)


def _inline(text: str) -> str:
    kept: list[str] = []

    def keep(shown: str) -> str:
        kept.append(shown)
        return f"\ue000{len(kept) - 1}\ue001"

    text = text.replace("\ue000", "").replace("\ue001", "")
    if "`" in text:
        text = _INLINE_CODE.sub(lambda m: keep(_code_span(m.group(2))), text)
    if "\\" in text:
        text = _ESCAPED.sub(lambda m: keep(m.group(1)), text)
    if "[" in text:
        text = _WIKILINK.sub(lambda m: _wikilink(m.group(2), embed=bool(m.group(1))), text)
        text = _FOOTNOTE_REFERENCE.sub("", text)
        for _ in range(2):  # an image inside a link's text: [![alt](img)](url)
            text = _IMAGE.sub(lambda m: m.group(1), text)
            text = _LINK.sub(lambda m: m.group(1), text)
        text = _REFERENCE_LINK.sub(lambda m: m.group(1), text)
    if "](" in text:  # the tail of a link whose "[" is missing, or on another line: its URL shows as a URL
        text = _ORPHAN_LINK_TAIL.sub(lambda m: " " + m.group(1), text)
    if "[[" in text or "]]" in text:  # a wikilink left unclosed, or closed on another line: its words
        text = _STRAY_WIKILINK.sub("", text)
    if "<" in text:
        text = _AUTOLINK.sub(lambda m: keep(m.group(1)), text)
    if has_url(text):
        text = URL.sub(lambda m: keep(m.group(0)), text)
    if "*" in text or "_" in text or "~~" in text or "==" in text:
        for marks, emphasis in _EMPHASIS:
            previous = None
            while previous != text and any(mark in text for mark in marks):  # nested: ***both*** or **a _b_ c**
                previous, text = text, emphasis.sub(lambda m: m.group(2), text)
    if "&" in text:
        text = html.unescape(text)
    while "\ue000" in text:  # kept text can hold kept text (a URL in a link's text)
        text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    return text


def _code_span(code: str) -> str:
    """CommonMark strips one space each side of a code span that has text besides spaces."""
    return code[1:-1] if len(code) > 2 and code[0] == code[-1] == " " and code.strip() else code


def _wikilink(inner: str, embed: bool) -> str:
    target, _, alias = inner.partition("|")
    target, alias = target.strip(), alias.strip()
    if alias and _looks_like_target(alias) and not _looks_like_target(target):
        target, alias = alias, target  # Dendron writes [[shown text|note]], the other way round from Obsidian
    note, _, heading = target.partition("#")
    note = _DENDRON_VAULT.sub("", note.strip()).removesuffix(".md")
    if embed:
        if _ATTACHMENT.search(note):
            return ""  # an image, a PDF...: its name says nothing in a line of text
        return alias if alias and not alias.isdigit() else note.rsplit("/", 1)[-1]
    if alias:
        return alias
    heading = heading.strip().removeprefix("^") if not heading.strip().startswith("^") else ""
    if note and heading:
        return f"{note} > {heading}"
    return note or heading


def _looks_like_target(text: str) -> bool:
    """A note's path or Dendron name rather than words to show: no spaces, and a dot, slash or #."""
    return bool(text) and not any(c.isspace() for c in text) and any(c in text for c in "./#")
