"""Links between notes: parsing them out of markdown, and resolving them the way Obsidian does.

Parsed: wikilinks ``[[note]]``, ``[[note|shown text]]``, ``[[note#heading]]``,
``[[note#^block]]``, embeds ``![[note]]``, and markdown links to notes ``[text](path/note.md)``
(relative to the linking note, percent-decoded, ``<...>`` allowed). Links inside code fences
and inline code are not links. External URLs are not links to notes.

Resolution happens when asked (not when indexed), so a link made before its target exists,
or to a note renamed since, resolves as soon as the vault allows:
1. a markdown link names a path relative to its note (kept as the vault path): that note, or nothing;
2. a wikilink with a folder is matched as a path suffix (``[[b/note]]`` finds ``a/b/note.md``);
3. a name is tried as a path next to the linking note, then from the vault root;
4. a bare name is matched against file names, case-insensitively; when several notes share
   it, the one nearest the linking note wins (the longest common folder), then the
   shortest path, as Obsidian's "shortest path" links do;
5. then against the names front matter gives a note: its aliases and its title (Dendron names
   notes by title), as Obsidian looks up aliases.
"""

from __future__ import annotations

import os
import posixpath
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from urllib.parse import unquote

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# [text](target "title"): target without spaces, or <target with spaces>
_MARKDOWN_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_DENDRON_VAULT = re.compile(r"^dendron://[^/]*/")
# Files a wikilink may name that are not notes (dots alone say nothing: Dendron names are dotted).
_ATTACHMENT = re.compile(
    r"\.(png|jpe?g|gif|svg|webp|bmp|avif|heic|pdf|mp3|wav|m4a|ogg|flac|webm|mp4|mov|mkv|canvas|excalidraw|base|csv|zip)$", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Link:
    line: int  # 1-based line in the note
    kind: str  # wiki | embed | markdown
    target: str  # the note part as written, without #heading or |text; markdown links: the vault path it names
    heading: str = ""  # heading, or ^block id, linked to inside the target
    label: str = ""  # the text shown for the link, if any
    exact: bool = False  # a markdown link names one path exactly; wikilinks are looked up by name

    @property
    def key(self) -> str:
        return link_key(self.target)

    @property
    def label_key(self) -> str:
        """The label as a target too ([[shown|note]] in Dendron's order); "" for markdown links."""
        return link_key(self.label.partition("#")[0]) if self.label and self.kind != "markdown" else ""


def link_key(target: str) -> str:
    """How a link target is compared: lower case, "/" separators, no leading "./" or "/", no
    ".md", no Dendron vault prefix (``dendron://vault/``)."""
    key = _DENDRON_VAULT.sub("", target.strip()).replace("\\", "/").lower()
    while key.startswith("./"):
        key = key[2:]
    key = key.lstrip("/")
    return key[:-3] if key.endswith(".md") else key


def prose_lines(lines: list[str], first_line: int = 1) -> Iterator[tuple[int, str]]:
    """(line number, text) of the lines outside code fences, inline code blanked out: where
    links and tags can be."""
    fence: str | None = None
    for number, line in enumerate(lines, first_line):
        marker = _FENCE.match(line)
        if fence is not None:
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = None
            continue
        if marker:
            fence = marker.group(1)
            continue
        yield number, _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line) if "`" in line else line


def parse_links(lines: list[str], first_line: int = 1, source: str = "") -> list[Link]:
    """Every link in ``lines`` (the note's lines from ``first_line`` on, the note at vault
    path ``source``), outside code."""
    folder = posixpath.dirname(source)
    found: list[Link] = []
    for number, text in prose_lines(lines, first_line):
        if "[" not in text:
            continue
        for match in _WIKILINK.finditer(text):
            inner, label = match.group(2), ""
            if "|" in inner:
                inner, label = inner.split("|", 1)
            target, _, heading = inner.partition("#")
            if not target.strip() and not heading or _ATTACHMENT.search(target.strip()):
                continue  # empty, or an image, a PDF...: not a note
            found.append(Link(number, "embed" if match.group(1) else "wiki", target.strip(), heading.strip(), label.strip()))
        for match in _MARKDOWN_LINK.finditer(text):
            raw = match.group(3).strip("<>").strip()
            if _SCHEME.match(raw):
                continue  # a URL, an obsidian:// or mailto: link
            target, _, heading = unquote(raw).partition("#")
            if target and not target.lower().endswith(".md"):
                continue  # an image or another file, not a note
            if target:
                target = posixpath.normpath(posixpath.join(folder, target.replace("\\", "/")))
            found.append(Link(number, "markdown", target, heading, match.group(2).strip(), exact=bool(target)))
    return found


class _NameTable:
    """Names (link keys, file names, aliases) to note numbers, as two sorted arrays of machine
    words: each name's hash and its note. A lookup returns the notes whose name has the same
    hash, in the order they were given; the caller checks the name itself, so a hash shared by
    two names costs a comparison, never a wrong note.

    Dicts of the names themselves, and the paths, were 25 MB at 100,000 notes: 300,000 small
    objects, made again after each change to the index while the daemon does other work (the
    first scan, at start). Spread over the arenas of Python's allocator, they kept an arena's
    freed memory from going back to the system wherever one of them landed. A table is 12 bytes
    a note, in two arrays; the paths are one string (bench/search_scale.py has the RSS)."""

    def __init__(self, names: Iterable[str], numbers: Iterable[int]):
        # Imported here: the chunking workers import this module, and never resolve a link.
        import numpy as np

        hashes = np.fromiter(map(hash, names), dtype=np.int64)
        order = np.argsort(hashes, kind="stable")  # equal hashes keep the order given
        self._hashes, self._numbers = array("q"), array("i")
        self._hashes.frombytes(hashes[order].tobytes())
        self._numbers.frombytes(np.fromiter(numbers, dtype=np.int32, count=len(hashes))[order].tobytes())

    def candidates(self, name: str) -> list[int]:
        key = hash(name)
        first = bisect_left(self._hashes, key)
        last = bisect_right(self._hashes, key, first)
        return self._numbers[first:last].tolist()  # in the order given: the sort above is stable


class Resolver:
    """Resolves link targets against the notes of the vault (paths, and names from front matter).

    Threads share one: its memo is a dict, whose single lookups and stores are atomic, and two
    threads working out the same link store the same answer."""

    def __init__(self, paths: list[str], aliases: dict[str, list[str]]):
        """``aliases``: each note's names besides its file name (front-matter aliases and title)."""
        # Every path in one string ("\0" cannot be in a path), found by its number.
        self._joined = "\0".join(paths)
        self._starts = array("q", accumulate((len(path) + 1 for path in paths), initial=0))
        keys = [link_key(path) for path in paths]
        self._by_key = _NameTable(keys, range(len(keys)))
        self._by_name = _NameTable((key.rpartition("/")[2] for key in keys), range(len(keys)))
        del keys
        self._aliases = aliases
        named = [(alias.strip().lower(), number) for number, path in enumerate(paths) for alias in aliases.get(path, ()) if alias.strip()]
        self._by_alias = _NameTable((alias for alias, _ in named), (number for _, number in named))
        self._memo: dict[tuple, str | None] = {}

    def _path(self, number: int) -> str:
        return self._joined[self._starts[number] : self._starts[number + 1] - 1]

    def _with_key(self, key: str) -> str | None:
        """The note whose link key is ``key`` (the last one given, when two paths differ only in case)."""
        for number in reversed(self._by_key.candidates(key)):
            path = self._path(number)
            if link_key(path) == key:
                return path
        return None

    def _named(self, name: str) -> list[str]:
        """Notes whose file name (as a link key) is ``name``, in the order given."""
        paths = (self._path(number) for number in self._by_name.candidates(name))
        return [path for path in paths if link_key(path).rpartition("/")[2] == name]

    def _aliased(self, alias: str) -> list[str]:
        """Notes with ``alias`` (lower case) among their front-matter names."""
        paths = (self._path(number) for number in self._by_alias.candidates(alias))
        return [path for path in paths if any(a.strip().lower() == alias for a in self._aliases.get(path, ()))]

    def resolve(self, link: Link, source: str) -> str | None:
        """The vault path the link leads to, or None when no note answers to it."""
        if not link.target:
            return source  # [[#heading]]: a heading in the same note
        # A resolver lives until the index changes: what a link from a folder leads to stays put.
        key = (link.target, link.label, link.exact, link.kind, posixpath.dirname(source))
        if key not in self._memo:
            self._memo[key] = self._resolve(link, source)
        return self._memo[key]

    def _resolve(self, link: Link, source: str) -> str | None:
        if link.exact:
            return self._with_key(link.key)
        found = self._look_up(link.key, link.target, source)
        if found is None and link.label_key:
            # Dendron writes [[shown text|note#heading]], the other way round from Obsidian.
            found = self._look_up(link.label_key, link.label.partition("#")[0], source)
        return found

    def _look_up(self, key: str, written: str, source: str) -> str | None:
        if not key:
            return None
        beside = link_key(posixpath.join(posixpath.dirname(source), key))
        for exact in (beside, key):  # next to the linking note, then from the vault root
            if (found := self._with_key(exact)) is not None:
                return found
        candidates = [p for p in self._named(key.rsplit("/", 1)[-1]) if "/" not in key or link_key(p).endswith("/" + key)]
        if not candidates:
            # Only then a title or an alias: a note's file name wins over another note's title or
            # alias of the same name, as in Obsidian (a [[Lookup]] goes to Lookup.md first).
            candidates = self._aliased(written.strip().lower())
        if not candidates:
            return None
        return min(candidates, key=lambda p: (-_shared_folders(p, source), p.count("/"), p))

    def keys_for(self, path: str, aliases: list[str]) -> set[str]:
        """Link keys that may lead to ``path`` (its name, its path, its title and aliases): for backlinks."""
        key = link_key(path)
        keys = {key, key.rsplit("/", 1)[-1]}
        parts = key.split("/")
        keys.update("/".join(parts[i:]) for i in range(len(parts)))
        keys.update(alias.strip().lower() for alias in aliases if alias.strip())
        return keys


def _shared_folders(path: str, source: str) -> int:
    a, b = os.path.dirname(path).split("/"), os.path.dirname(source).split("/")
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared
