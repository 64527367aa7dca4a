"""The model's markdown as WhatsApp text: WhatsApp's own formatting (``*bold*``, ``_italic_``,
``~strike~``, ``` ``` ``` blocks and `` `code` ``, ``- `` lists, ``> `` quotes), links written out, and
a long reply cut into messages of at most 4,096 characters at paragraph boundaries; and a message
flattened into the one parameter of a template (what may be sent outside the 24-hour window).

WhatsApp has no markup for headings, links or tables and no escape character: a heading becomes
a bold line, a link its text and address, and a table stays as the model wrote it. Code is left
exactly as it is, inside and outside blocks.
"""

from __future__ import annotations

import re

from tarsd.channels.paragraphs import pack

MAX_MESSAGE_CHARS = 4096  # the Cloud API's limit for a text message's body
MAX_PARAMETER_CHARS = 1024  # a template's body parameter
LINE_JOINER = " · "  # what stands for a line break in a template's parameter, which may hold none
CUT_NOTE = "… (the rest is in tars's inbox)"
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^(\s*)[*+](\s+)")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_ESCAPED = re.compile(r"\\([\\`*_~\[\]()#+\-.!>|])")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_LINK = re.compile(r"\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
# A single * around words, as markdown's italic: not inside a word (2*3*4 is arithmetic).
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
# Stand-ins for what must not be touched again: private-use characters, never in a model's text.
_HOLD = "\ue000"
_BOLD_MARK = "\ue001"


def to_whatsapp(markdown: str) -> str:
    """``markdown`` with WhatsApp's formatting instead."""
    out: list[str] = []
    fence = ""
    for line in markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1) == fence and not line.strip()[3:].strip():
                fence = ""
                out.append("```")
            else:
                out.append(line)  # code: exactly as written
            continue
        if opened:
            fence = opened.group(1)
            out.append("```")  # WhatsApp has no language tag: the fence alone
            continue
        shaped = _line(line)
        if not shaped and out and not out[-1]:
            continue  # one blank line between paragraphs is enough (in code, every one is kept)
        out.append(shaped)
    if fence:
        out.append("```")  # a block the model never closed
    return "\n".join(out).strip()


def _line(line: str) -> str:
    if _RULE.match(line):
        return "⎯⎯⎯"
    heading = _HEADING.match(line)
    if heading:
        title = _inline(heading.group(1)).replace("*", "").strip()
        return f"*{title}*" if title else ""
    line = _BULLET.sub(r"\1-\2", line)
    return _inline(line).rstrip()


def _inline(text: str) -> str:
    held: list[str] = []

    def hold(value: str) -> str:
        held.append(value)
        return f"{_HOLD}{len(held) - 1}{_HOLD}"

    text = _CODE_SPAN.sub(lambda m: hold(f"`{m.group(2)}`" if len(m.group(1)) == 1 else f"```{m.group(2)}```"), text)
    text = _ESCAPED.sub(lambda m: hold(m.group(1)), text)
    text = _IMAGE.sub(lambda m: hold(_link(m.group(1), m.group(2))), text)
    text = _LINK.sub(lambda m: hold(_link(m.group(1), m.group(2))), text)
    text = _AUTOLINK.sub(lambda m: hold(m.group(1)), text)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}_{m.group(1)}_{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return re.sub(f"{_HOLD}(\\d+){_HOLD}", lambda m: held[int(m.group(1))], text)


def _link(label: str, url: str) -> str:
    label = label.strip()
    if not label or label == url or label == url.removeprefix("mailto:"):
        return url
    return f"{label} ({url})"


def template_parameter(text: str, limit: int = MAX_PARAMETER_CHARS) -> str:
    """``text`` as a template's body parameter, which WhatsApp refuses (error 132018) when it holds a
    line break or a tab or more than four spaces in a row, or more than ``limit`` characters: its
    lines joined by " · ", every run of blanks one space, and a text still too long cut at a word
    with a note that the rest is in tars's inbox (where a message tars starts is kept whole)."""
    lines = (" ".join(line.split()) for line in text.splitlines())  # split(): every kind of blank, NBSP too
    flat = LINE_JOINER.join(line for line in lines if line)
    if not flat:
        return "(no text)"  # WhatsApp refuses an empty parameter too
    if len(flat) <= limit:
        return flat
    room = limit - len(CUT_NOTE)
    cut = flat[:room]
    at = cut.rfind(" ")
    if at >= room // 2:
        cut = cut[:at]
    return cut.rstrip(" ·") + CUT_NOTE


def split(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """``text`` as messages of at most ``limit`` characters, cut between paragraphs where it can
    be: a paragraph longer than a message is cut between lines, then after a sentence, then at a
    space. A code block cut in two is closed at the end of one message and opened again in the next."""
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    return pack(_pieces(text, limit), limit)


def _paragraphs(text: str) -> list[str]:
    """Paragraphs (text between blank lines); a code block is a paragraph of its own, blank lines and all."""
    found: list[str] = []
    lines: list[str] = []
    in_code = False

    def flush() -> None:
        if lines:
            found.append("\n".join(lines))
            lines.clear()

    for line in text.split("\n"):
        if line.strip() == "```":
            if not in_code:
                flush()
            lines.append(line)
            if in_code:
                flush()
            in_code = not in_code
        elif in_code:
            lines.append(line)
        elif not line.strip():
            flush()
        else:
            lines.append(line)
    flush()
    return found


def _pieces(text: str, limit: int) -> list[str]:
    pieces: list[str] = []
    for paragraph in _paragraphs(text):
        if len(paragraph) <= limit:
            pieces.append(paragraph)
        elif paragraph.startswith("```"):
            pieces.extend(_cut_code(paragraph, limit))
        else:
            pieces.extend(_cut(paragraph, limit))
    return pieces


def _cut(paragraph: str, limit: int) -> list[str]:
    out: list[str] = []
    rest = paragraph
    while len(rest) > limit:
        window = rest[: limit + 1]
        at = window.rfind("\n")
        if at < limit // 2:
            at = max(window.rfind(". "), window.rfind("! "), window.rfind("? "))
            at = at + 1 if at >= limit // 2 else -1
        if at < limit // 2:
            at = window.rfind(" ")
        if at <= 0:
            at = limit  # one word longer than a message: cut it
        out.append(rest[:at].rstrip())
        rest = rest[at:].lstrip()
    if rest:
        out.append(rest)
    return out


def _cut_code(block: str, limit: int) -> list[str]:
    """A code block longer than a message, cut between its lines, each part a closed block."""
    lines = block.split("\n")
    closed = lines[-1].strip() == "```" and len(lines) > 1
    body = lines[1:-1] if closed else lines[1:]
    room = limit - len("```\n\n```")
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in body:
        while len(line) > room:  # a single line longer than a message
            if current:
                out.append("```\n" + "\n".join(current) + "\n```")
                current, size = [], 0
            out.append("```\n" + line[:room] + "\n```")
            line = line[room:]
        if current and size + 1 + len(line) > room:
            out.append("```\n" + "\n".join(current) + "\n```")
            current, size = [], 0
        current.append(line)
        size += len(line) + (1 if len(current) > 1 else 0)
    if current:
        out.append("```\n" + "\n".join(current) + "\n```")
    return out
