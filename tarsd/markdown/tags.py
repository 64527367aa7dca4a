"""Tags: from front matter (``tags: [a, b/c]``) and inline ``#tags`` in the prose, as
Obsidian reads them: letters, digits, ``_``, ``-`` and ``/`` for nesting, not only digits
(``#123`` is not a tag), outside code, not part of a URL or a heading mark. A filter for
``a`` also matches the nested ``a/b``.
"""

from __future__ import annotations

import re

from tarsd.markdown.links import prose_lines

_INLINE_TAG = re.compile(r"(?:^|(?<=[\s(\[,;]))#([\w/-]*[^\W\d][\w/-]*)", re.UNICODE)


def parse_tags(lines: list[str]) -> list[str]:
    """Inline tags in the note's lines, in order, once each, without '#'."""
    found: dict[str, None] = {}
    for _, text in prose_lines(lines):
        if "#" not in text:
            continue
        for match in _INLINE_TAG.finditer(text):
            tag = match.group(1).strip("/")
            if tag:
                found.setdefault(tag, None)
    return list(found)


def normalise(tag: str) -> str:
    return tag.strip().lstrip("#").strip("/").lower()
