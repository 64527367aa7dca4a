"""A hit's snippet: the words of its passage around the best match, as plain text.

The passage is first turned into what a reader sees (tarsd/markdown/visible.py): no heading
marks, link syntax, fences or emphasis. The query's phrases are then found in that text with
the keyword index's own tokenizer (so "publishing" matches "publish", and CJK words by their
characters, as the keyword search found them), and the window of SNIPPET_TOKENS words holding
the most different phrases is shown, its matches between ``marks``. A mark holds whole words
of the visible text, never part of a URL shown in it; a link's target is not visible text, so
nothing in it is ever marked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tarsd.markdown.tokens import index_text_positions
from tarsd.markdown.visible import URL, has_url, visible_text

SNIPPET_TOKENS = 24
# A match this many words into the window, when the passage allows: some words lead up to it.
LEAD_TOKENS = SNIPPET_TOKENS // 4

WORD_JOINER = "\u2060"
TokenSpans = Callable[[str], list[tuple[int, int, str]]]  # Store.keyword_token_spans


@dataclass(frozen=True, slots=True)
class QueryPhrase:
    tokens: tuple[str, ...]  # as the index folds and stems them
    prefix: bool  # the last token is a prefix ("publ"*)


def query_phrases(parts: list[str], tokenize: Callable[[str], list[str]]) -> list[QueryPhrase]:
    """The keyword query's phrases (searcher.query_parts: '"word"', '"two words"', '"pre"*') as tokens."""
    phrases = []
    for part in parts:
        tokens = tuple(tokenize(part.removesuffix("*")))
        if tokens:
            phrases.append(QueryPhrase(tokens, part.endswith("*")))
    return phrases


def make_snippet(
    passage: str, phrases: list[QueryPhrase], token_spans: TokenSpans, marks: tuple[str, str], size: int = SNIPPET_TOKENS
) -> str:
    """The best ``size`` words of ``passage`` as plain text on one line, matches marked, "…" where
    text was left out. With no match (a hit found by meaning alone): the passage's first words."""
    text = visible_text(passage)
    words = _words(text, token_spans)
    if not words:
        return " ".join(text.split())
    urls = [match.span() for match in URL.finditer(text)] if has_url(text) else []
    found = [
        (first, last, number)
        for first, last, number in _matches(words, phrases)
        if not any(start < words[last][1] and words[first][0] < end for start, end in urls)
        and not _inside_word(text, words[first][0], words[last][1])
    ]
    first_word = _best_window(found, len(words), size)
    last_word = min(len(words), first_word + size) - 1
    start = 0 if first_word == 0 else words[first_word][0]
    end = len(text) if last_word == len(words) - 1 else words[last_word][1]
    pieces, at = [], start
    for first, last, _ in found:
        if first < first_word or last > last_word or words[first][0] < at:
            continue  # outside the window, or overlapping a match already marked
        pieces += [
            _unmarked(text[at : words[first][0]], marks),
            marks[0],
            _unmarked(text[words[first][0] : words[last][1]], marks),
            marks[1],
        ]
        at = words[last][1]
    pieces.append(_unmarked(text[at:end], marks))
    shown = " ".join("".join(pieces).split())
    return ("…" if start > 0 else "") + shown + ("…" if end < len(text) else "")


def _unmarked(text: str, marks: tuple[str, str]) -> str:
    """``text`` with the marks it holds itself ("**" in code) cut by an invisible word joiner, so
    that only the snippet's own marks pair up where they are shown."""
    for mark in marks:
        if len(mark) > 1 and mark in text:
            text = text.replace(mark, mark[0] + WORD_JOINER + mark[1:])
    return text


def _inside_word(text: str, start: int, end: int) -> bool:
    """The tokenizer cuts at "_", a reader does not: "token" in GITHUB_TOKEN is not a word."""
    return text[start - 1 : start] == "_" or text[end : end + 1] == "_"


def _words(text: str, token_spans: TokenSpans) -> list[tuple[int, int, str]]:
    """(start, end, token) of each keyword token of ``text``, as offsets in ``text``."""
    if text.isascii():  # no CJK to set apart, and a byte's offset is the character's
        return token_spans(text)
    spaced, positions = index_text_positions(text)
    # Byte offset -> character offset: the characters starting before it (a UTF-8 character
    # starts at every byte but a continuation byte, 0b10xxxxxx).
    starts = np.frombuffer(spaced.encode("utf-8"), dtype=np.uint8) & 0xC0 != 0x80
    character = [0, *np.cumsum(starts).tolist()]
    return [(positions[character[start]], positions[character[end]], token) for start, end, token in token_spans(spaced)]


def _matches(words: list[tuple[int, int, str]], phrases: list[QueryPhrase]) -> list[tuple[int, int, int]]:
    """(first word, last word, phrase number) of every place a phrase stands, in text order.
    Phrases are looked up by their first token, so a long passage and a long query cost their
    sum, not their product (a paragraph-long query has up to 64 phrases)."""
    by_first: dict[str, list[tuple[int, QueryPhrase]]] = {}
    first_is_prefix: list[tuple[int, QueryPhrase]] = []  # a one-token prefix ("publ"*): any word starting so
    for number, phrase in enumerate(phrases):
        if phrase.prefix and len(phrase.tokens) == 1:
            first_is_prefix.append((number, phrase))
        else:
            by_first.setdefault(phrase.tokens[0], []).append((number, phrase))
    tokens = [token for _, _, token in words]
    # Only the words some phrase starts with are looked at, unless any word may start a prefix.
    starts = range(len(tokens)) if first_is_prefix else [i for i, token in enumerate(tokens) if token in by_first]
    found = []
    for i in starts:
        token = tokens[i]
        here = by_first.get(token)
        if first_is_prefix:
            starting = [(number, p) for number, p in first_is_prefix if token.startswith(p.tokens[0])]
            if starting:
                here = sorted([*(here or ()), *starting], key=lambda pair: pair[0])
        for number, phrase in here or ():
            n = len(phrase.tokens)
            if i + n > len(words):
                continue
            last = tokens[i + n - 1]
            if all(tokens[i + k] == phrase.tokens[k] for k in range(1, n - 1)) and (
                last.startswith(phrase.tokens[-1]) if phrase.prefix else last == phrase.tokens[-1]
            ):
                found.append((i, i + n - 1, number))
    return found


def _best_window(found: list[tuple[int, int, int]], count: int, size: int) -> int:
    """The first word of the window holding the most different phrases (then the most matches),
    the earliest of equals."""
    best, best_start = (0, 0), 0
    for start in sorted({max(0, min(first - LEAD_TOKENS, count - size)) for first, _, _ in found}):
        inside = [number for first, last, number in found if first >= start and last < start + size]
        score = (len(set(inside)), len(inside))
        if score > best:
            best, best_start = score, start
    return best_start
