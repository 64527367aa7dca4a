"""The model's markdown as Telegram messages: Telegram's HTML (``<b>``, ``<i>``, ``<s>``,
``<code>``, ``<pre>``, ``<a href>``, ``<blockquote>``), with every other ``<``, ``>`` and ``&``
escaped, so a note's text arrives as written, never read as markup; and a long reply cut into
messages below Telegram's 4,096 characters, between paragraphs where it can be.

HTML rather than MarkdownV2: MarkdownV2 needs 18 characters escaped everywhere outside code and
refuses the whole message for one missed; HTML needs three, and its tags close per paragraph.
Each paragraph is rendered on its own and the rendered paragraphs are packed into messages, so a
cut never falls inside a tag. The limit is counted on the HTML itself, which is never shorter than
the text Telegram counts.
"""

from __future__ import annotations

import html
import re

from tarsd.channels.paragraphs import pack

MAX_MESSAGE_CHARS = 4096  # Telegram's limit for a message's text (after its entities are parsed)
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+#.-]*)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^(\s*)[*+-]\s+")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_ESCAPED = re.compile(r"\\([\\`*_~\[\]()#+\-.!>|<&])")
_LINK = re.compile(r"!?\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_ITALIC_UNDERSCORE = re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HOLD = "\ue000"  # a private-use character, never in a model's text: stands in for finished HTML
_LINK_SCHEMES = ("http://", "https://", "tg://")  # what Telegram opens; any other address is written out


def escape(text: str) -> str:
    """``text`` safe between Telegram's HTML tags: ``&``, ``<`` and ``>`` as entities."""
    return html.escape(text, quote=False)


def to_messages(markdown: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """``markdown`` as Telegram HTML messages of at most ``limit`` characters each."""
    blocks = _blocks(markdown.replace("\r\n", "\n").replace("\r", "\n"))
    return pack((piece for block in blocks for piece in _rendered(block, limit)), limit)


def to_html(markdown: str) -> str:
    """``markdown`` as one piece of Telegram HTML, however long."""
    return "\n\n".join(piece for block in _blocks(markdown) for piece in _rendered(block, 1 << 30))


def _blocks(text: str) -> list[list[str]]:
    """Paragraphs as lists of lines; a fenced code block is one block of its own (its first line the fence)."""
    blocks: list[list[str]] = []
    lines: list[str] = []
    fence = ""
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            lines.append(line)
            if opened and opened.group(1) == fence and not line.strip()[3:].strip():
                blocks.append(lines)
                lines, fence = [], ""
            continue
        if opened:
            if lines:
                blocks.append(lines)
            lines, fence = [line], opened.group(1)
        elif not line.strip():
            if lines:
                blocks.append(lines)
            lines = []
        else:
            lines.append(line)
    if lines:
        blocks.append(lines)
    return blocks


def _rendered(block: list[str], limit: int) -> list[str]:
    """A block as HTML pieces of at most ``limit`` characters each (one, unless it is too long)."""
    opened = _FENCE.match(block[0])
    if opened:
        closed = len(block) > 1 and block[-1].strip() in ("```", "~~~")
        return _code_block(block[1:-1] if closed else block[1:], opened.group(2), limit)
    if all(_QUOTE.match(line) for line in block):
        inner = [_QUOTE.sub("", line, count=1) for line in block]
        whole = "<blockquote>" + "\n".join(_line(line) for line in inner) + "</blockquote>"
        if len(whole) <= limit:
            return [whole]
        return _lines(inner, limit)
    whole = "\n".join(_line(line) for line in block).strip()
    if len(whole) <= limit:
        return [whole] if whole else []
    return _lines(block, limit)


def _lines(lines: list[str], limit: int) -> list[str]:
    """A paragraph too long for one message, cut between its lines; a line too long, at spaces (unformatted)."""
    pieces = []
    for line in lines:
        shaped = _line(line)
        pieces += [shaped] if len(shaped) <= limit else _cut(escape(line.strip()), limit)
    return pack(pieces, limit, between="\n")


def _cut(text: str, limit: int) -> list[str]:
    """Escaped text cut after a sentence or at a space (never inside ``&amp;``: it holds no space)."""
    out: list[str] = []
    while len(text) > limit:
        window = text[: limit + 1]
        at = max(window.rfind(". "), window.rfind("! "), window.rfind("? "))
        at = at + 1 if at >= limit // 2 else window.rfind(" ")
        if at <= 0:
            at = limit
            entity = text.rfind("&", 0, at)
            if entity > at - 6 and ";" not in text[entity:at]:
                at = entity  # not through an entity
        out.append(text[:at].rstrip())
        text = text[at:].lstrip()
    if text:
        out.append(text)
    return out


def _code_block(lines: list[str], language: str, limit: int) -> list[str]:
    opening = f'<pre><code class="language-{escape(language)}">' if language else "<pre>"
    closing = "</code></pre>" if language else "</pre>"
    room = limit - len(opening) - len(closing)
    out: list[str] = []
    current: list[str] = []
    size = 0
    for raw in lines:
        line = escape(raw)
        while len(line) > room:  # one line longer than a message: cut, not through an entity
            part = _cut(line, room)[0] if " " in line[:room] else line[:room]
            if "&" in part[-5:] and ";" not in part[part.rfind("&") :]:
                part = part[: part.rfind("&")]
            if current:
                out.append(opening + "\n".join(current) + closing)
                current, size = [], 0
            out.append(opening + part + closing)
            line = line[len(part) :]
        if current and size + 1 + len(line) > room:
            out.append(opening + "\n".join(current) + closing)
            current, size = [], 0
        current.append(line)
        size += len(line) + (1 if len(current) > 1 else 0)
    if current:
        out.append(opening + "\n".join(current) + closing)
    return out


def _line(line: str) -> str:
    if _RULE.match(line):
        return "⎯⎯⎯"
    heading = _HEADING.match(line)
    if heading:
        title = _inline(heading.group(1))
        return f"<b>{title}</b>" if title else ""
    bullet = _BULLET.match(line)
    if bullet:
        return bullet.group(1) + "• " + _inline(line[bullet.end() :]).rstrip()
    return _inline(line).rstrip()


def _inline(text: str) -> str:
    """One line's inline markdown as HTML; everything not markup escaped."""
    held: list[str] = []

    def hold(value: str) -> str:
        held.append(value)
        return f"{_HOLD}{len(held) - 1}{_HOLD}"

    text = text.replace(_HOLD, "")
    text = _CODE_SPAN.sub(lambda m: hold(f"<code>{escape(m.group(2))}</code>"), text)
    text = _ESCAPED.sub(lambda m: hold(escape(m.group(1))), text)
    text = _LINK.sub(lambda m: hold(_link(m.group(1), m.group(2))), text)
    text = _AUTOLINK.sub(lambda m: hold(escape(m.group(1))), text)
    text = escape(text)  # markdown's own marks (* _ ~) are not HTML's: they survive this
    text = _BOLD.sub(r"<b>\2</b>", text)
    text = _ITALIC_STAR.sub(r"<i>\1</i>", text)
    text = _ITALIC_UNDERSCORE.sub(r"<i>\1</i>", text)
    text = _STRIKE.sub(r"<s>\1</s>", text)
    while _HOLD in text:  # a held piece may hold another (a code span in a link's text)
        text = re.sub(f"{_HOLD}(\\d+){_HOLD}", lambda m: held[int(m.group(1))], text)
    return text


def _link(label: str, url: str) -> str:
    label_html = _inline(label.strip())
    if not url.startswith(_LINK_SCHEMES):
        return f"{label_html} ({escape(url)})"  # Telegram refuses a link it cannot open: written out
    return f'<a href="{html.escape(url, quote=True)}">{label_html}</a>'


def plain(html_text: str) -> str:
    """Telegram HTML back to plain text: for a message Telegram refused to parse, sent again unformatted."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))
