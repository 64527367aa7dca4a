"""Which files in the vault tars merges when a sync tool forks them, and how (tarsd/memory/merge.py).

- memory: ``[memory] semantic_file`` (Memory.md) and ``procedural_file`` (Procedural.md), merged
  line by line by provenance and tars's journal;
- log: ``corrections_file`` and ``rewards_file`` (feedback), the notes routines append to (their
  ``note``, and ``[routines] note``; ``{date}`` stands for any date; this machine's routines and the
  other machines' as their heartbeats list them), and the memory review's history
  (``[memory] history_folder``, a note a month: tarsd/memory/review_history.py): every line of both kept;
- yours: everything else (your notes, session logs): never merged by tars, listed in status and
  doctor with both paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tarsd.config.settings import MemoryConfig
from tarsd.memory.merge import LOG, MEMORY


def note_pattern(template: str) -> re.Pattern[str] | None:
    """A routine's note template ("Daily/{date}.md") as a pattern on vault paths."""
    template = template.strip().lstrip("/")
    if not template:
        return None
    if not template.endswith(".md"):
        template += ".md"  # as the note target adds it (tarsd/speaking/vault_note.py)
    parts = [re.escape(part) for part in template.split("{date}")]
    return re.compile(r"\d{4}-\d{2}-\d{2}".join(parts) + r"\Z")


class FileKinds:
    def __init__(self, memory: MemoryConfig, note_templates: Callable[[], list[str]]):
        self.memory = memory
        self.note_templates = note_templates  # the routines' note targets, this machine's and the others'
        folder = memory.history_folder.strip().strip("/")
        self._history = re.compile(re.escape(folder) + r"/\d{4}-\d{2}\.md\Z") if folder else re.compile(r"(?!)")

    def kind(self, rel: str) -> str | None:
        """MEMORY, LOG, or None for a file of the user's that tars never merges."""
        if rel in (self.memory.semantic_file, self.memory.procedural_file):
            return MEMORY
        if rel in (self.memory.corrections_file, self.memory.rewards_file):
            return LOG
        if self._history.match(rel):
            return LOG
        for template in self.note_templates():
            pattern = note_pattern(template)
            if pattern is not None and pattern.match(rel):
                return LOG
        return None
