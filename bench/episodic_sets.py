"""The conversations episodic recall is measured on, written as tars writes session logs.

- ``locomo``: LoCoMo (Maharana et al., ACL 2024), read at run time from
  ../shared/data/locomo-dev (or --data DIR: the owners run the same code on their held-out
  five). Nothing of it is copied into the repository. Each conversation is a vault of its own
  whose ``sessions/`` holds one session log per LoCoMo session, written by tars's own log
  writer (tarsd/chat/assistant.py session_log_text): front matter, a title, the session's date
  and time, then one line per turn, ``- Speaker: what was said``. Only what a log of that talk
  would hold is written: no turn ids, no photo captions. A question's evidence turns become
  (log, line) pairs, the lines the model must see.
- ``updates`` and ``journals``: this project's own sets (bench/episodic_own.py), generated
  from seeds.

The split is fixed before anything is tuned: LoCoMo's conversations in order of the sha256 of
"locomo" and the file name, the first three to tune on, the other two held out (dev: 30, 26,
43; held-out: 42, 41). The own sets split by seed (episodic_own.TUNING_SEEDS / HELD_OUT_SEEDS).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from common import SHARED

LOCOMO_DIR = SHARED / "data" / "locomo-dev"
# LoCoMo's categories as commonly read; 5 (adversarial: no answer in the talk) is left out.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TUNING_SHARE = 3  # of five conversations: the rest are held out


@dataclass(slots=True)
class Question:
    id: str
    text: str
    category: str
    evidence: list[tuple[str, int]]  # (vault path, 1-based line) the model must see
    # Own sets: the line holding the current value, and lines holding values it replaced.
    newest: tuple[str, int] | None = None
    stale: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class EpisodicSet:
    name: str  # the conversation's (or generated vault's) name
    split: str  # dev | held-out
    notes: dict[str, str]  # vault path -> text
    questions: list[Question]
    unresolved: int = 0  # evidence ids naming no turn (left out; a question with none left is dropped)

    def key(self) -> str:
        return hashlib.sha256("".join(f"{p}\0{t}\0" for p, t in sorted(self.notes.items())).encode()).hexdigest()[:12]


_SESSION = re.compile(r"session_(\d+)$")
_TURN_ID = re.compile(r"D:?(\d+):(\d+)")


def turn_id(text: str) -> str:
    """An evidence id as the turns spell it ("D:11:26" in one question is D11:26); "" for none."""
    match = _TURN_ID.fullmatch(text.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else ""


def locomo_date(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a (local, naive) datetime."""
    return datetime.strptime(" ".join(text.replace(",", " ").split()), "%I:%M %p on %d %B %Y")


def conversation_order(names: list[str]) -> list[str]:
    """The conversations in their fixed split order (by a hash of the name alone)."""
    return sorted(names, key=lambda name: hashlib.sha256(f"locomo\0{name}".encode()).hexdigest())


def locomo_sets(data: Path = LOCOMO_DIR) -> list[EpisodicSet]:
    # The writer tars uses for its own logs, so the vault holds what a user's would.
    from tarsd.chat.assistant import said_line, session_log_stem, session_log_text, transcript_title

    files = sorted(data.glob("*.json"))
    if not files:
        raise SystemExit(f"no LoCoMo conversations in {data}: pass --data DIR (README there says what it holds)")
    order = conversation_order([f.stem for f in files])
    sets = []
    for path in files:
        raw = json.loads(path.read_text(encoding="utf-8"))
        notes: dict[str, str] = {}
        where: dict[str, tuple[str, int]] = {}
        sessions = sorted((int(m.group(1)), key) for key in raw if (m := _SESSION.match(key)) and raw[key])
        for _, key in sessions:
            turns = raw[key]
            started = locomo_date(raw[f"{key}_date_time"])
            ended = started + timedelta(minutes=len(turns))
            title = transcript_title(turns[0]["text"])
            import os

            if os.environ.get("CAPTIONS"):
                bullets = [
                    said_line(
                        str(turn["speaker"]), str(turn["text"]) + (f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else "")
                    )
                    for turn in turns
                ]
            else:
                bullets = [said_line(str(turn["speaker"]), str(turn["text"])) for turn in turns]
            text = session_log_text(f"locomo-{path.stem}", started, ended, len(turns), title, bullets)
            log_path = f"sessions/{session_log_stem(started, title)}.md"
            notes[log_path] = text
            first_line = text.split("\n").index(bullets[0]) + 1
            for offset, turn in enumerate(turns):
                where[str(turn["dia_id"])] = (log_path, first_line + offset)
        questions, unresolved = [], 0
        for n, qa in enumerate(raw["qa"]):
            category = CATEGORIES.get(int(qa.get("category", 0)))
            if category is None:
                continue
            ids = [turn_id(part) for entry in qa.get("evidence", []) for part in str(entry).split(";")]
            lines = list(dict.fromkeys(where[i] for i in ids if i in where))
            unresolved += sum(1 for i in ids if i not in where)
            if not lines:
                continue
            questions.append(Question(f"{path.stem}-{n}", str(qa["question"]), category, lines))
        split = "dev" if order.index(path.stem) < TUNING_SHARE else "held-out"
        sets.append(EpisodicSet(f"locomo-{path.stem}", split, notes, questions, unresolved))
    return sets
