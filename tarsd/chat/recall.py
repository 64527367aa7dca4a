"""What of the vault goes into the prompt: all of Memory.md, or the part of it that matters now;
and the lines of notes and session logs recalled for a message (the opening context and
memory_search's result, both from tarsd/search/recall.py).

Up to the budget ([memory] prompt_lines / prompt_tokens: the design's ~100 lines / ~1,000
tokens) the whole file goes in, as always (mode "whole"). Above it (mode "selective"): the
always-on part, which is the text before the first heading and the core section ([memory]
core_section, "Core" by default, with its subsections), plus the sections most relevant to
the message ([memory] recall_sections of them); the prompt names the sections left out and
says they can be searched with memory_search.

A section's relevance is that of its best line (or its heading) to the message: the cosine
from the memory line vectors, which the index keeps by content hash (tarsd/memory/vectors.py),
when the model is loaded, and keyword overlap weighted by how rare each word is in the file.
Without the model, keywords alone decide.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tarsd.chat import prompts
from tarsd.config.settings import ChatConfig, MemoryConfig
from tarsd.memory.facts import STOPWORDS, features
from tarsd.search.recall import Piece, Recalled, recall
from tarsd.search.searcher import Searcher

WHOLE, SELECTIVE = "whole", "selective"
# Sections scoring below this are not relevant to the message.
RELEVANT = 0.3

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(slots=True)
class Section:
    title: str
    start: int  # line index of the heading
    end: int  # one past the last line
    lines: list[str]
    core: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


@dataclass(slots=True)
class Recall:
    mode: str  # whole | selective
    text: str  # what goes into the prompt
    lines: int  # of the whole file (non-blank)
    tokens: int
    core_found: bool = False
    chosen: list[str] = field(default_factory=list)  # titles of the relevant sections included
    omitted: list[str] = field(default_factory=list)  # titles left to memory_search
    always_lines: int = 0  # the always-on part (non-blank lines)
    always_tokens: int = 0


def split_sections(text: str) -> tuple[list[str], list[Section]]:
    """(lines before the first section, the sections). Sections start at headings of the
    file's top level, or of the level below a single title heading."""
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []  # (line, level, title)
    fenced = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            headings.append((index, len(match.group(1)), match.group(2)))
    if not headings:
        return lines, []
    levels = sorted({level for _, level, _ in headings})
    level, title_line = levels[0], -1
    top = [index for index, lv, _ in headings if lv == level]
    if len(top) == 1 and len(levels) > 1:
        level, title_line = levels[1], top[0]  # "# Memory" over "## Pets", "## Work": split at the second level
    starts = [(index, title) for index, lv, title in headings if lv <= level and index != title_line]
    preamble = lines[: starts[0][0]] if starts else lines
    sections = []
    for n, (index, title) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        sections.append(Section(title, index, end, lines[index:end]))
    return preamble, sections


class MemoryRecall:
    def __init__(self, config: MemoryConfig, vectors, count_tokens: Callable[[str], int]):
        self.config = config
        self.vectors = vectors  # LineVectors, or None
        self.count_tokens = count_tokens

    def size(self, text: str) -> tuple[int, int]:
        return sum(1 for line in text.splitlines() if line.strip()), (self.count_tokens(text) if text.strip() else 0)

    def select(self, text: str, message: str = "") -> Recall:
        lines, tokens = self.size(text)
        if lines <= self.config.prompt_lines and tokens <= self.config.prompt_tokens:
            return Recall(WHOLE, text, lines, tokens, always_lines=lines, always_tokens=tokens)
        preamble, sections = split_sections(text)
        wanted = self.config.core_section.strip().lower()
        for section in sections:
            section.core = bool(wanted) and section.title.strip().lower() == wanted
        always = "\n".join(preamble).strip()
        core = [s for s in sections if s.core]
        always_text = "\n\n".join(filter(None, [always, *(s.text for s in core)]))
        always_lines, always_tokens = self.size(always_text)
        others = [s for s in sections if not s.core]
        chosen: list[Section] = []
        if message.strip() and others:
            scores = self._scores(message, others)
            budget = max(0, self.config.prompt_tokens - always_tokens)
            used = 0
            for index in sorted(range(len(others)), key=lambda i: -scores[i]):
                if len(chosen) >= self.config.recall_sections or scores[index] < RELEVANT:
                    break
                size = self.count_tokens(others[index].text)
                if chosen and used + size > budget:
                    continue  # the most relevant section always goes in; others while they fit
                chosen.append(others[index])
                used += size
        included = sorted(core + chosen, key=lambda s: s.start)
        parts = [always] if always else []
        parts += [s.text for s in included]
        return Recall(
            SELECTIVE,
            "\n\n".join(parts),
            lines,
            tokens,
            core_found=bool(core),
            chosen=[s.title for s in sorted(chosen, key=lambda s: s.start)],
            omitted=[s.title for s in others if s not in chosen],
            always_lines=always_lines,
            always_tokens=always_tokens,
        )

    def _scores(self, message: str, sections: list[Section]) -> list[float]:
        """Each section's relevance to the message: its best line's (heading included)."""
        units: list[tuple[int, str]] = []  # (section, line text)
        for n, section in enumerate(sections):
            units.append((n, section.title))
            units.extend((n, line) for line in section.lines[1:] if line.strip())
        words = [_words(text) for _, text in units]
        frequency = Counter(w for ws in words for w in ws)
        # Words of the message that the file never uses ("when", "should") cannot tell sections apart.
        wanted = frozenset(w for w in _words(message) if frequency[w])
        weight = {w: math.log(1 + len(units) / (1 + frequency[w])) for w in wanted}
        total = sum(weight.values())
        scores = [0.0] * len(sections)
        for (n, _), ws in zip(units, words, strict=True):
            if total:
                scores[n] = max(scores[n], sum(weight[w] for w in wanted & ws) / total)
        if self.vectors is not None:
            cosines = self.vectors.cosines(message, [text for _, text in units])
            if cosines is not None:
                for (n, _), cosine in zip(units, cosines, strict=True):
                    if cosine == cosine:  # NaN: this line has no vector yet
                        scores[n] = max(scores[n], float(cosine))
        return scores

    def warnings(self, text: str) -> list[str]:
        recall = self.select(text)
        name = self.config.semantic_file
        if recall.always_lines <= self.config.warn_lines and recall.always_tokens <= self.config.warn_tokens:
            if recall.mode == SELECTIVE and not recall.core_found and self.config.core_section:
                return [
                    f"{name} is past the prompt budget ({recall.lines} lines, about {recall.tokens} tokens) and has no "
                    f"'# {self.config.core_section}' section: only the sections relevant to each message reach the model; "
                    f"put what tars should always know under '# {self.config.core_section}'"
                ]
            return []
        part = name if recall.mode == WHOLE else f"the {self.config.core_section} section of {name}"
        return [
            f"{part} has {recall.always_lines} lines and about {recall.always_tokens} tokens, past the guideline of "
            f"{self.config.warn_lines} lines / {self.config.warn_tokens} tokens; it is in every prompt, so trim it"
        ]


def _words(text: str) -> frozenset[str]:
    fact = features(text)
    return frozenset(t for t in fact.tokens if t[:1].isalnum() and t not in STOPWORDS)


# ---- the vault's lines for a message: the opening context, and memory_search's result ----


@dataclass(slots=True)
class Context:
    """What recall sent the model: the pieces (tarsd/search/recall.py) and the tagged text made of them."""

    recalled: Recalled
    text: str  # "" when nothing was recalled
    tokens: int  # of the recalled text, with the embedder's tokenizer

    @property
    def spent(self) -> str:
        return self.recalled.spent(self.tokens)


def opening_context(searcher: Searcher, message: str, config: ChatConfig | None = None) -> Context:
    """The relevant context the chat puts in the system prompt for a conversation's first message:
    hybrid recall within [chat] context_chars, pieces below context_min_score left out, at most
    context_results notes. Raises as recall does (the caller treats context as a help)."""
    config = config if config is not None else ChatConfig()
    recalled = recall(
        searcher,
        message,
        "hybrid",
        budget_chars=config.context_chars,
        min_score=config.context_min_score,
        max_notes=config.context_results,
    )
    return render(searcher, recalled, "relevant-context")


def render(searcher: Searcher, recalled: Recalled, tag: str, **attributes: str) -> Context:
    """The recalled pieces as tagged note blocks inside ``tag``, which says what they spent."""
    if not recalled.pieces:
        return Context(recalled, "", 0)
    tokens = _count(searcher, recalled.text())
    blocks = "\n".join(note_block(piece) for piece in recalled.pieces)
    return Context(recalled, prompts.wrap(tag, blocks, **attributes, spent=recalled.spent(tokens)), tokens)


def note_block(piece: Piece) -> str:
    """One note's recalled lines, with where they are and when the note took place (or last changed)."""
    when = {"date": piece.date} if piece.dated else {"modified": piece.date}
    return prompts.block("note", piece.text(), path=piece.path, **when, lines=piece.line_ranges(), type=piece.memory_type)


def _count(searcher: Searcher, text: str) -> int:
    counter, _ = searcher.embedder.counter()
    return counter.count([text])[0] if text else 0
