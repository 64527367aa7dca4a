"""The memory files in the vault: Memory.md (semantic), the procedural rules, the feedback
files, and the atomic writes that keep an edit made in Obsidian a second ago.

The daemon writes memory, never the model: tools only ask. Every write re-reads the file,
applies the change, writes a temp file and renames it over the original; if the file
changed on disk meanwhile, the change is applied again to the new content.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .config import MemoryConfig

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
DEFAULT_SECTION = "Notes"
# Above these, a new fact is taken for one already remembered.
DUPLICATE_TEXT_RATIO = 0.88
DUPLICATE_COSINE = 0.78  # MiniLM: "my dog is Perry" vs "Dog: Perry (beagle)" 0.79; peanuts vs shellfish allergy 0.46
# A fact joins the section holding its most similar bullet when they are at least this close.
SECTION_COSINE = 0.35

Similarity = Callable[[str, list[str]], list[float]]  # cosine of a text against candidates


@dataclass(frozen=True, slots=True)
class Remembered:
    added: bool
    path: str  # relative to the vault
    section: str
    duplicate_of: str = ""


def read_text(path: Path) -> str:
    """User-managed files are edited outside tars: never fail on their encoding."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def atomic_update(path: Path, change: Callable[[str], str | None], attempts: int = 5) -> str | None:
    """Apply ``change`` to the file's current text and replace the file atomically.

    The file is re-read right before writing; if it changed meanwhile (someone saved it in
    Obsidian), the change is made again on the new text. ``change`` returning None means
    nothing to write. Returns the text written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        before = _stamp(path)
        new = change(read_text(path))
        if new is None:
            return None
        # A dot-name keeps the temp file out of the index and the watcher's way.
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tars-tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(new)
                handle.flush()
                os.fsync(handle.fileno())
            if path.exists():
                os.chmod(temp, path.stat().st_mode & 0o777)
            if _stamp(path) != before:
                continue  # changed under us: start again from the new text
            os.replace(temp, path)
            return new
        finally:
            if os.path.exists(temp):
                os.unlink(temp)
    raise OSError(f"{path} kept changing while tars tried to update it; try again")


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", _BULLET.sub("", text).lower()).split())


def bullets(text: str) -> list[tuple[int, str, str]]:
    """(line index, bullet text, section) for every bullet line, outside code fences."""
    found, section, fenced = [], "", False
    for index, line in enumerate(text.splitlines()):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        if heading := _HEADING.match(line):
            section = heading.group(2)
        elif _BULLET.match(line):
            found.append((index, _BULLET.sub("", line).strip(), section))
    return found


def insert_under(text: str, section: str, line: str) -> str:
    """Add ``line`` at the end of the named section (any heading level), creating the
    section at the end of the file if there is none."""
    lines = text.splitlines()
    wanted = section.lower()
    start = next((i for i, text in enumerate(lines) if (m := _HEADING.match(text)) and m.group(2).lower() == wanted), None)
    if start is None:
        body = text.rstrip("\n")
        return (body + "\n\n" if body else "") + f"# {section}\n{line}\n"
    level = len(_HEADING.match(lines[start]).group(1))
    end = len(lines)
    for i in range(start + 1, len(lines)):
        match = _HEADING.match(lines[i])
        if match and len(match.group(1)) <= level:
            end = i
            break
    last = end
    while last > start + 1 and not lines[last - 1].strip():
        last -= 1
    lines.insert(last, line)
    return "\n".join(lines) + "\n"


class MemoryFiles:
    def __init__(self, vault: Path, config: MemoryConfig):
        self.vault = vault
        self.config = config
        self._lock = threading.Lock()

    def path(self, name: str) -> Path:
        return self.vault / name

    @property
    def semantic(self) -> Path:
        return self.path(self.config.semantic_file)

    @property
    def procedural(self) -> Path:
        return self.path(self.config.procedural_file)

    def read_semantic(self) -> str:
        return read_text(self.semantic)

    def read_procedural(self) -> str:
        return read_text(self.procedural)

    def remember(self, fact: str, kind: str = "semantic", section: str = "", similarity: Similarity | None = None) -> Remembered:
        """Add a fact (semantic, under a fitting heading of Memory.md) or a rule (procedural),
        unless a near-duplicate is already there."""
        fact = " ".join(fact.split()).lstrip("-*+ ").strip()
        if not fact:
            raise ValueError("nothing to remember: the fact is empty")
        if kind not in ("semantic", "procedural"):
            raise ValueError(f"kind must be semantic or procedural, not {kind!r}")
        target = self.semantic if kind == "semantic" else self.procedural
        rel = target.relative_to(self.vault).as_posix()
        with self._lock:
            existing = bullets(read_text(target))
            duplicate = self._duplicate(fact, [text for _, text, _ in existing], similarity)
            if duplicate:
                return Remembered(False, rel, "", duplicate)
            chosen = section.strip() or (self._section_for(fact, existing, similarity) if kind == "semantic" else "Rules")
            atomic_update(target, lambda text: insert_under(text, chosen, f"- {fact}"))
        return Remembered(True, rel, chosen)

    @staticmethod
    def _duplicate(fact: str, existing: list[str], similarity: Similarity | None) -> str:
        wanted = normalise(fact)
        for text in existing:
            if difflib.SequenceMatcher(None, wanted, normalise(text)).ratio() >= DUPLICATE_TEXT_RATIO:
                return text
        if similarity and existing:
            scores = similarity(fact, existing)
            best = max(range(len(existing)), key=lambda i: scores[i])
            if scores[best] >= DUPLICATE_COSINE:
                return existing[best]
        return ""

    @staticmethod
    def _section_for(fact: str, existing: list[tuple[int, str, str]], similarity: Similarity | None) -> str:
        candidates = [(text, section) for _, text, section in existing if section]
        if similarity and candidates:
            scores = similarity(fact, [text for text, _ in candidates])
            best = max(range(len(candidates)), key=lambda i: scores[i])
            if scores[best] >= SECTION_COSINE:
                return candidates[best][1]
        return DEFAULT_SECTION

    def append_rules(self, rules: list[str]) -> int:
        added = 0
        for rule in rules:
            if self.remember(rule, "procedural").added:
                added += 1
        return added

    # ---- feedback: /w and /r ----

    def record_feedback(self, good: bool, question: str, answer: str, note: str = "") -> str:
        name = self.config.rewards_file if good else self.config.corrections_file
        stamp = time.strftime("%Y-%m-%d %H:%M")
        entry = [f"## {stamp}", f"- user: {_one_line(question)}", f"- tars: {_one_line(answer)}"]
        if note.strip():
            entry.append(f"- note: {_one_line(note)}")
        block = "\n".join(entry) + "\n"
        atomic_update(self.path(name), lambda text: (text.rstrip("\n") + "\n\n" if text.strip() else "") + block)
        return name

    def load_feedback(self) -> tuple[str, str]:
        return read_text(self.path(self.config.corrections_file)), read_text(self.path(self.config.rewards_file))

    def archive_feedback(self) -> list[str]:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        archived = []
        for name in (self.config.corrections_file, self.config.rewards_file):
            path = self.path(name)
            if path.exists():
                target = path.with_name(f"{path.stem}-{stamp}{path.suffix}")
                os.replace(path, target)
                archived.append(target.relative_to(self.vault).as_posix())
        return archived

    def warnings(self, count_tokens: Callable[[str], int]) -> list[str]:
        text = self.read_semantic()
        lines = len([line for line in text.splitlines() if line.strip()])
        tokens = count_tokens(text)
        if lines > self.config.warn_lines or tokens > self.config.warn_tokens:
            return [
                f"{self.config.semantic_file} has {lines} lines and about {tokens} tokens, past the guideline of "
                f"{self.config.warn_lines} lines / {self.config.warn_tokens} tokens; it is in every prompt, so trim it"
            ]
        return []


def _one_line(text: str, limit: int = 500) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
