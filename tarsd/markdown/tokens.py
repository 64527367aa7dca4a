"""How text becomes keyword tokens, the same way for notes and for queries.

FTS5's unicode61 tokenizer (under porter stemming) splits at spaces and punctuation, folds
case and strips accents ("café" matches "cafe" and the other way round). Chinese and
Japanese have no spaces, and Korean attaches particles to words, so unicode61 would keep a
whole run of characters as one token and ``東京`` would never match ``東京に住む``. Each CJK
character is therefore set apart before indexing, and a CJK query word becomes the phrase
of its characters: a word is found wherever its characters stand side by side. (A trigram
table cannot find two-character words, which are most of them; see bench/search_cjk.py.)
"""

from __future__ import annotations

import re

# Han (with extensions and compatibility ideographs), kana, Hangul syllables and jamo.
_CJK_CLASS = (
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
_CJK = re.compile(f"({_CJK_CLASS})")


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def index_text(text: str) -> str:
    """Text as the keyword index should see it: CJK characters set apart."""
    return _CJK.sub(r" \1 ", text) if has_cjk(text) else text


def index_text_positions(text: str) -> tuple[str, list[int]]:
    """index_text(text), and for each of its positions (and its end) the position in ``text``
    it stands for: a token found in the index's text is marked at the same words in ``text``."""
    if not has_cjk(text):
        return text, list(range(len(text) + 1))
    spaced: list[str] = []
    positions: list[int] = []
    for i, char in enumerate(text):
        if _CJK.fullmatch(char):
            spaced.append(f" {char} ")
            positions.extend((i, i, i + 1))
        else:
            spaced.append(char)
            positions.append(i)
    positions.append(len(text))
    return "".join(spaced), positions


def query_phrase(word: str) -> str:
    """A query word as FTS5 phrase text: CJK characters set apart, the rest as it is."""
    return " ".join(index_text(word).split())
