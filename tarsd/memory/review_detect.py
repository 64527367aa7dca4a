"""The review's model-free checks of Memory.md as a whole: duplicates, lines that update each
other, lines whose time has passed, and a file past its budget. Each finds *findings*; the review
(tarsd/memory/review.py) turns them into proposals the user approves or rejects.

- **Duplicates**: two lines that say the same fact. The judge ``remember`` uses (facts.compare,
  with the line vectors when they are loaded) on the lines with units, times and dates written
  one way; and two lines about the same thing of the same person saying the same of it in other
  words ("Anna lives in Cork", "Anna (sister) is based in Cork"). One line of each group is kept:
  the user's own before one tars wrote, before one the model noted; then the one saying what most
  of the others say; then the first in the file. A line is removed only when the line kept says all
  it says (``covers``): one saying more is never removed for one saying less.
- **Updates**: two lines giving two values of one attribute of one person, an attribute that holds
  one value at a time ("Gym locker: 14", "New gym locker: 16"), with one value changed: the older
  is superseded by the newer. Newer is the one not yet in the file at a moment the other was (a
  stamp's day, tarsd's looks at the file, git's commits); without such dates the pair is left alone.
- **Expired**: a line naming an event whose date has passed ("Flight to Lisbon on 14 March"), a
  plan whose day has passed (a day ahead of the day the line was written: "Train to Osaka on 24
  November"), or holding words of a passing state ("on call this week", "currently reading Dune",
  "until Friday") written long enough ago. When it was written is its stamp's date, else when it was
  first in the file (tarsd's looks, review_store.py; or git, review_git.py); a line nothing dates is
  given no age.
- **Budget**: the part of the file in every prompt (the whole file up to [memory] prompt_lines)
  is past its budget: the largest sections but the core are proposed to move to a note of their
  own, linked from where they stood.

Comparing every pair of a 1,000-line file with the judge would take seconds, so pairs are taken
only where two lines share a person, a predicate, a value or a rare word (an index of each), and,
with the vectors, where their cosine is high.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from tarsd.memory import facts, review_words
from tarsd.memory.lines import MemoryLine
from tarsd.memory.review_words import (
    DURABLE,
    EVENT,
    LIFE_EVENT,
    SOMEONE,
    UNTIL_DAY,
    WEEKDAYS,
    Names,
    Reading,
    about_people,
    one_typo,
    read,
    transient_days,
)

DUPLICATE, SUPERSEDE, EXPIRED, BUDGET = "duplicate", "supersede", "expired", "budget"
REMOVING = (DUPLICATE, SUPERSEDE, EXPIRED)

# A key shared by more lines than this is too common to pair them by ("work", "likes").
COMMON_KEY = 60
# With the vectors: each line's nearest lines at or above this cosine are compared too.
NEAR_COSINE = 0.8
NEAR_COUNT = 4
# Words of a passing state: how long after their day a line is proposed (a margin for a stamp's day
# or the review's first sight of a line, which may be a week after it was written).
GRACE_DAYS = 0
# A date without a year is the first such day from this long before the line was written.
DATE_LOOKBACK_DAYS = 14
WORD_OVERLAP = 0.5
# A day of the year (no year said) this far ahead of the day a line was written may be a plan; further
# ahead it may as well be a yearly date.
PLAN_AHEAD_DAYS = 92


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # duplicate | supersede | expired | budget
    line: int  # index (in the lines given) of the line it would remove; budget: the first line of the section
    keep: int = -1  # duplicate, supersede: the line that stays
    why: str = ""
    section: str = ""  # budget: the section proposed to move
    lines: tuple[int, ...] = ()  # budget: the lines that move


@dataclass(frozen=True, slots=True)
class Context:
    """What the checks know beside the lines: today; for a line without a stamp, a moment (unix time)
    it was in the file by (the first look that found it, or the commit that brought it: it was
    written by then) and one it was not in the file yet (the look, or commit, before: it was written
    after; None when nothing says); the cosine between two lines and each line's nearest lines, when
    the vectors are loaded."""

    today: date
    first_seen: Callable[[MemoryLine], float | None] = lambda _line: None
    cosine: Callable[[int, int], float | None] | None = None
    neighbours: Callable[[int], Sequence[int]] | None = None
    absent: Callable[[MemoryLine], float | None] = lambda _line: None


def _stamped(line: MemoryLine) -> date | None:
    if line.stamp is not None:
        try:
            return date.fromisoformat(line.stamp.date)
        except ValueError:
            pass
    return None


def _start_of(day: date) -> float:
    return datetime.combine(day, time.min).timestamp()


def written(line: MemoryLine, context: Context) -> date | None:
    """The last day a line can have been written: its stamp, else the day it was first in the file."""
    stamped = _stamped(line)
    if stamped is not None:
        return stamped
    seen = context.first_seen(line)
    return None if seen is None else date.fromtimestamp(seen)


def _latest(line: MemoryLine, context: Context) -> float | None:
    """The moment a line was written by: the end of its stamp's day, else the first moment it was seen."""
    stamped = _stamped(line)
    return _start_of(stamped + timedelta(days=1)) if stamped is not None else context.first_seen(line)


def _earliest(line: MemoryLine, context: Context) -> float | None:
    """The moment a line was not written yet: the start of its stamp's day, else the last moment it was missing."""
    stamped = _stamped(line)
    return _start_of(stamped) if stamped is not None else context.absent(line)


def readings(lines: Sequence[MemoryLine]) -> list[Reading]:
    names = Names([line.text for line in lines])
    return about_people([read(line.text, names) for line in lines])


# ---- pairs worth comparing ----


def candidate_pairs(readings: Sequence[Reading], context: Context) -> set[tuple[int, int]]:
    """Pairs (i < j) that share a person, a predicate, a value or a word, or are near in meaning."""
    index: dict[str, list[int]] = defaultdict(list)
    for i, reading in enumerate(readings):
        if len(reading.text) > facts.LONG_LINE_CHARS:
            continue
        keys = {f"k:{reading.fact.key}"}
        if reading.subject:
            keys.add(f"s:{reading.subject}")
        else:
            keys |= {f"c:{cue}" for cue in reading.cues} | {f"w:{word}" for word in reading.words} | {f"v:{v}" for v in reading.values}
            keys |= {f"x:{word}" for word in reading.value_words}
        for key in keys:
            index[key].append(i)
    pairs: set[tuple[int, int]] = set()
    for key, members in index.items():
        if len(members) < 2 or (len(members) > COMMON_KEY and not key.startswith("k:")):
            continue
        for position, i in enumerate(members):
            for j in members[position + 1 :]:
                pairs.add((i, j))
    if context.neighbours is not None:
        for i in range(len(readings)):
            for j in context.neighbours(i):
                if i != j:
                    pairs.add((min(i, j), max(i, j)))
    return pairs


# ---- one pair ----


def _typo_equal(a: str, b: str) -> bool:
    """Two words a typo apart (review_words.one_typo), both 5 letters or more."""
    return a == b or (min(len(a), len(b)) >= 5 and one_typo(a, b))


def _same_words(a: frozenset[str], b: frozenset[str]) -> bool:
    if a == b:
        return True
    left, right = set(a - b), set(b - a)
    for word in list(left):
        match = next((other for other in right if _typo_equal(word, other)), None)
        if match is not None:
            left.discard(word)
            right.discard(match)
    return not left and not right


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = sum(1 for word in a if any(_typo_equal(word, other) for other in b))
    return shared / len(a | b) if shared else 0.0


def _about_the_same(a: Reading, b: Reading) -> bool:
    """The same thing of the same person: the same predicate, or (with none) mostly the same words."""
    if a.subject != b.subject or a.subject == SOMEONE:
        return False
    if a.cues and b.cues:
        return bool(a.cues & b.cues)
    if a.cues or b.cues:
        return False
    if a.subject and not a.words and not b.words:
        return True  # "GP is Dr Rossi", "New GP: Dr Byrne"
    return _overlap(a.words, b.words) >= WORD_OVERLAP


def _one_attribute(a: Reading, b: Reading) -> bool:
    """For an update, more than "about the same": one attribute, named alike. The same predicates
    (not just one in common); without a predicate, or with only "is a" ("Usual coffee is a cortado"),
    the attribute is the words and both lines must name it ("Now a physiotherapist" names none)."""
    if a.cues != b.cues or a.named_by != b.named_by:
        return False  # "Anna's home number" is not "Anna's work number" ("home" says more of it)
    if a.cues - {"kind"}:
        return True
    if a.subject and not a.words and not b.words:
        return True  # "GP is Dr Rossi", "New GP: Dr Byrne": the subject is the attribute
    return bool(a.words) and bool(b.words)


# Predicates of personal facts that hold one value at a time: one city lived in, one employer, one
# manager, one partner, one phone, one birthday, one age, one weight, one number of children, one
# team, one weekly distance, one diet. What someone is allergic to is a list ("allergic to peanuts", "to
# shellfish"); what they drink, like, want, play, use is a list unless the line names the attribute
# ("Coffee order: cortado") or gives an amount ("Pays €1,200 rent a month").
SINGLE_VALUED = frozenset(
    {"live", "employer", "role", "manager", "partner", "phone", "number", "birthday", "age", "weight", "kids", "team", "run", "diet"}
)
MULTI_VALUED = frozenset({"allergy"})


def single_valued(a: Reading, b: Reading, kinds: set[str]) -> bool:
    """Whether the attribute two lines give values of holds one value at a time, so a new value
    replaces the old one. By its predicate; else by the line's form: "Label: value" and "Attribute is
    value" name one attribute with one value ("Gym locker: 14", "Rent is €900"); a verb phrase
    relates the subject to things, any number of them ("Wants to visit Osaka again", "Likes jazz",
    "No peanuts for Jude"), unless its value is an amount, a time, a day or a number ("Pays €1,200
    rent a month", "Uses locker 14 at the gym", "Bins go out on Monday"). When unsure: not."""
    cues = a.cues | b.cues
    if cues & MULTI_VALUED:
        return False
    if cues and cues <= SINGLE_VALUED:
        return True
    if a.form != "verb" and b.form != "verb":
        return True
    return "word" not in kinds


def relate(a: Reading, b: Reading, cosine: float | None = None) -> str | None:
    """duplicate, supersede (one updates the other), or None (different facts, or unsure)."""
    if facts.same_fact(a.fact, b.fact, cosine):  # the judge remember uses says the same fact
        return DUPLICATE
    if a.past != b.past or a.negated != b.negated or _timed(a) != _timed(b):
        return None  # how things were, or a passing state, is not the same fact as how they are
    if not _about_the_same(a, b):
        return None
    a_values, b_values = _years_aside(a.values, b.values)
    same_values = a_values == b_values and _same_words(a.value_words, b.value_words)
    if _substituted(a.words, b.words):
        # About another thing as well ("plays guitar for 10 years", "plays bass for 4"); unless both
        # name one exact value, a time or a number (a standup "at 11:15" said in other words).
        specific = same_values and any(_kind_of(v) in ("time", "tel", "date", "money") for v in a_values) and bool(a.words & b.words)
        return DUPLICATE if specific else None
    if same_values:
        if a.cues or b.cues or _same_words(a.words, b.words):
            return DUPLICATE
        return None
    only_a = (a_values - b_values) | _unmatched(a.value_words, b.value_words)
    only_b = (b_values - a_values) | _unmatched(b.value_words, a.value_words)
    if not (only_a and only_b) or not _comparable(only_a, only_b):
        return None
    if _timed(a) or _timed(b) or LIFE_EVENT.search(a.plain) or LIFE_EVENT.search(b.plain):
        return None  # events, passing states and life events are not values of one thing ("away until 6 January")
    if not _one_attribute(a, b) or _slots(a_values - b_values, a.value_words, b.value_words) != 1:
        return None
    if _slots(b_values - a_values, b.value_words, a.value_words) != 1:
        return None  # two things differ ("No peanuts for Jude", "No shellfish for Ben"): not one value that changed
    if not single_valued(a, b, {_kind_of(v) for v in only_a | only_b}):
        return None
    return SUPERSEDE


def _slots(values: frozenset[str], value_words: frozenset[str], other_words: frozenset[str]) -> int:
    """How many values a line says that the other does not: each name, number, time or date one,
    and the words of a job or kind ("product manager") one together."""
    return len(values) + bool(_unmatched(value_words, other_words))


def _unmatched(a: frozenset[str], b: frozenset[str]) -> set[str]:
    """Words of ``a`` that ``b`` lacks, typos aside."""
    return {w for w in a - b if not any(_typo_equal(w, other) for other in b)}


def _years_aside(a: frozenset[str], b: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """A date with a year and the same day without one ("2001-04-01", "Apr 1") are one value."""
    short_a = {v for v in a if v.startswith("on") and len(v) == 6}
    short_b = {v for v in b if v.startswith("on") and len(v) == 6}
    if not short_a and not short_b:
        return a, b

    def fold(values: frozenset[str], others: set[str]) -> frozenset[str]:
        return frozenset("on" + v[6:] if v.startswith("on") and len(v) == 10 and "on" + v[6:] in others else v for v in values)

    return fold(a, short_b), fold(b, short_a)


def _substituted(a: frozenset[str], b: frozenset[str]) -> bool:
    """Each side has a word the other lacks (typos aside)."""
    left = [w for w in a - b if not any(_typo_equal(w, other) for other in b)]
    right = [w for w in b - a if not any(_typo_equal(w, other) for other in a)]
    return bool(left and right)


def _timed(reading: Reading) -> bool:
    return transient_days(reading.plain) is not None or bool(reading.dates and EVENT.search(reading.plain))


_WEEKDAY_NAMES = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())


def _kind_of(value: str) -> str:
    if value in _WEEKDAY_NAMES:
        return "weekday"
    if value.startswith("tel"):
        return "tel"
    if value.startswith("at") and value[2:].isdigit():
        return "time"
    if value.startswith("on") and value[2:].isdigit():
        return "date"
    if value.startswith("eur"):
        return "money"
    if value[:1].isdigit():
        unit = value.lstrip("0123456789.")
        return f"number{unit}"
    return "word"


def _comparable(left: set[str], right: set[str]) -> bool:
    """Values of one kind on both sides (a number for a number, a name for a name)."""
    return bool({_kind_of(v) for v in left} & {_kind_of(v) for v in right})


# ---- the checks ----


def _rank(line: MemoryLine) -> tuple[int, int]:
    """Which line of a group of duplicates stays: the user's own, then one tars wrote, then the
    model's; the first in the file."""
    who = 0 if line.stamp is None else 2 if line.stamp.by_model else 1
    return (who, line.index)


def _newer(i: int, j: int, lines: Sequence[MemoryLine], rs: Sequence[Reading], context: Context) -> int | None:
    """Of two lines with two values of one thing, the newer; None when it cannot be told. Only dates
    tell: a stamp's day, the looks that found a line and missed it, the commits that brought it. A
    line in the file at a moment the other was not yet is the older. Without such dates nothing is
    proposed, whatever the lines say: "Moved to Berlin" below "Lives in Dublin" reads as the newer,
    but the Dublin line may be one edited in place since (a move back), and which came last is then a
    guess whose wrong side removes the truth."""
    ci, cj = _certainly_before(lines[i], lines[j], context), _certainly_before(lines[j], lines[i], context)
    if ci != cj:
        return j if ci else i
    return None


def _certainly_before(a: MemoryLine, b: MemoryLine, context: Context) -> bool:
    """``a`` was written before ``b``: ``b`` was not in the file yet at a moment ``a`` was (a look, or
    a commit, found ``a`` and not ``b``), or on a day after the day ``a`` was stamped."""
    latest_a, earliest_b = _latest(a, context), _earliest(b, context)
    return latest_a is not None and earliest_b is not None and earliest_b >= latest_a


def _lists(rs: Sequence[Reading]) -> set[tuple]:
    """Predicates the file holds with several values at once for one person ("wants to visit
    Osaka again", "... Denver again", "... Lisbon again"): a list, not a value that changed. Three
    values or more, none of them said to be a change."""
    values: dict[tuple, set[frozenset[str]]] = defaultdict(set)
    changed: dict[tuple, int] = defaultdict(int)
    for reading in rs:
        key = _signature(reading)
        values[key].add(reading.values | reading.value_words)
        changed[key] += reading.change
    return {key for key, found in values.items() if len(found) >= 3 and changed[key] == 0}


def _signature(reading: Reading) -> tuple:
    return (reading.subject, reading.cues, reading.words)


def find_pairs(lines: Sequence[MemoryLine], rs: Sequence[Reading], context: Context) -> list[Finding]:
    """Duplicates and supersedes. Lines saying one fact form a group; a group another group
    updates goes whole (each line a supersede, pointing at the line kept of the newest group);
    any other group keeps one line, the rest are duplicates. A line is removed at most once and
    never kept by another finding."""
    group = list(range(len(lines)))  # union-find over duplicate pairs

    def root(k: int) -> int:
        while group[k] != k:
            group[k] = group[group[k]]
            k = group[k]
        return k

    updates: list[tuple[int, int]] = []  # (older, newer)
    lists = _lists(rs)
    for i, j in sorted(candidate_pairs(rs, context)):
        cosine = context.cosine(i, j) if context.cosine is not None else None
        kind = relate(rs[i], rs[j], cosine)
        if kind == DUPLICATE:
            group[root(i)] = root(j)
        elif kind == SUPERSEDE and _signature(rs[i]) not in lists and _signature(rs[j]) not in lists:
            newer = _newer(i, j, lines, rs, context)
            if newer is not None:
                updates.append((j if newer == i else i, newer))
    members: dict[int, list[int]] = defaultdict(list)
    for k in range(len(lines)):
        members[root(k)].append(k)

    def keeper(ks: list[int]) -> int:
        """The line a group keeps: the user's own before one tars wrote before one the model noted; of
        those, the one that says what most of the others say (they may be removed), then the first."""
        return min(ks, key=lambda k: (_rank(lines[k])[0], -sum(covers(rs[k], rs[m]) for m in ks), lines[k].index))

    kept = {g: keeper(ks) if len(ks) > 1 else ks[0] for g, ks in members.items()}
    newer_of: dict[int, set[int]] = defaultdict(set)
    for older, newer in updates:
        if root(older) != root(newer):
            newer_of[root(older)].add(root(newer))

    def newest(g: int) -> int | None:
        """The group at the end of ``g``'s updates; None when they fork or loop (unsure)."""
        seen = {g}
        while newer_of.get(g):
            if len(newer_of[g]) > 1:
                return None
            g = next(iter(newer_of[g]))
            if g in seen:
                return None
            seen.add(g)
        return g

    found: list[Finding] = []
    for g, ks in sorted(members.items(), key=lambda item: min(item[1])):
        last = newest(g) if newer_of.get(g) else g
        if last is None:
            continue
        if last != g:
            keep = kept[last]
            for k in sorted(ks):
                found.append(Finding(SUPERSEDE, k, keep, _supersede_why(lines[k], lines[keep], rs[k], rs[keep])))
            continue
        for k in sorted(ks):
            if k != kept[g] and covers(rs[kept[g]], rs[k]):
                found.append(Finding(DUPLICATE, k, kept[g], _duplicate_why(lines[k], lines[kept[g]])))
    return found


# Words that say how the others relate, not what: "allergic to peanuts" says no more than "can't have peanuts".
FUNCTION_WORDS = frozenset(review_words.PREPOSITIONS | review_words.COPULA | {"a", "an", "the"})


def covers(kept: Reading, other: Reading) -> bool:
    """Whether the line kept says all ``other`` says, so removing ``other`` loses nothing: the judge
    ``remember`` uses calls them the same fact, or every word, value and predicate of ``other`` is in
    the kept line (typos aside). Lines said to be one fact each in other words ("Daily standup is at
    11:15", "Team standup: 11:15 every morning"), or joined through a third line, may each say
    something the kept line does not: those stay. A duplicate is a line whose removal changes nothing
    of what the file says."""
    if facts.same_fact(kept.fact, other.fact):
        return True
    if kept.subject != other.subject or not other.cues <= kept.cues:
        return False
    kept_values, other_values = _years_aside(kept.values, other.values)
    words = _unmatched(other.words - FUNCTION_WORDS, kept.words)
    return other_values <= kept_values and not words and not _unmatched(other.value_words, kept.value_words)


def _supersede_why(old: MemoryLine, new: MemoryLine, ro: Reading, rn: Reading) -> str:
    was = sorted((ro.values - rn.values) | (ro.value_words - rn.value_words))
    now = sorted((rn.values - ro.values) | (rn.value_words - ro.value_words))
    return f"line {new.index + 1} says it now ({', '.join(now)} where this says {', '.join(was)})"


def _duplicate_why(line: MemoryLine, keep: MemoryLine) -> str:
    return f"line {keep.index + 1} says the same"


def find_expired(lines: Sequence[MemoryLine], rs: Sequence[Reading], context: Context) -> list[Finding]:
    found = []
    for i, (line, reading) in enumerate(zip(lines, rs, strict=True)):
        why = expired(line, reading, context)
        if why:
            found.append(Finding(EXPIRED, i, why=why))
    return found


def expired(line: MemoryLine, reading: Reading, context: Context) -> str:
    """Why a line's time has passed, or "" when it has not (or cannot be told)."""
    text = reading.plain
    if reading.past or DURABLE.search(text):
        return ""
    wrote = written(line, context)
    today = context.today
    if reading.dates and EVENT.search(text):
        days = []
        for mention in reading.dates:
            if mention.year is not None:
                days.append(mention.on(mention.year))
            elif wrote is not None:
                days.append(_next_on(mention, wrote - timedelta(days=DATE_LOOKBACK_DAYS)))
            else:
                return ""  # which year's 14 March? Not told
        if days and all(day is not None and day < today for day in days):
            last = max(day for day in days if day is not None)
            return f"its date has passed ({last.isoformat()})"
        return ""
    if wrote is None:
        return ""
    if reading.dates and reading.form == "verb":
        if day := _planned(reading, wrote):
            if day < today:
                return f"a plan for {day.isoformat()}, written {wrote.isoformat()}"
            return ""
    if until := UNTIL_DAY.search(text):
        weekday = WEEKDAYS.index(until.group(1).lower())
        end = wrote + timedelta(days=(weekday - wrote.weekday()) % 7 or 7)
        if end + timedelta(days=GRACE_DAYS) < today:
            return f"'{until.group(0)}', written {wrote.isoformat()}"
        return ""
    days = transient_days(text)
    if days is not None and wrote + timedelta(days=days + GRACE_DAYS) < today:
        return f"a passing state, written {wrote.isoformat()}"
    return ""


def _planned(reading: Reading, wrote: date) -> date | None:
    """The last day a line plans for, when each date it names lay ahead of the day it was written
    ("Train to Osaka on 24 November", written on the 6th): a plan, over once its day has passed, in
    whatever words it is written. A date that had passed when the line was written is a record
    ("Started at Acme on 3 March 2025"), and a day of the year ahead by more than a season may be a
    yearly date ("Name day: 12 June" is a label, never a plan; a line saying it recurs is durable):
    neither is a plan. ``wrote`` is the last day the line can have been written, so a date is taken
    to lie ahead only when it lies ahead of that."""
    days = []
    for mention in reading.dates:
        if mention.year is not None:
            day = mention.on(mention.year)
            if day is None or day < wrote:
                return None
        else:
            day = _next_on(mention, wrote)
            if day is None or day > wrote + timedelta(days=PLAN_AHEAD_DAYS):
                return None
        days.append(day)
    return max(days) if days else None


def _next_on(mention, start: date) -> date | None:
    for year in (start.year, start.year + 1):
        day = mention.on(year)
        if day is not None and day >= start:
            return day
    return None


def find_budget(lines: Sequence[MemoryLine], budget_lines: int, core_section: str) -> list[Finding]:
    """Past the budget: the largest sections but the core, largest first, until the rest fits."""
    if budget_lines <= 0 or len(lines) <= budget_lines:
        return []
    sections: dict[str, list[int]] = defaultdict(list)
    for i, line in enumerate(lines):
        if line.section:
            sections[line.section].append(i)
    over = len(lines) - budget_lines
    found = []
    for name, members in sorted(sections.items(), key=lambda item: (-len(item[1]), item[0])):
        if over <= 0:
            break
        if name.lower() == core_section.lower() or len(members) < 2:
            continue
        found.append(
            Finding(
                BUDGET, members[0], why=f"Memory.md has {len(lines)} lines, past its {budget_lines}", section=name, lines=tuple(members)
            )
        )
        over -= len(members) - 1  # one link line stays
    return found


def review_lines(lines: Sequence[MemoryLine], context: Context) -> list[Finding]:
    """Every duplicate, supersede and expired line, model-free (no cap: the review applies it)."""
    rs = readings(lines)
    expired_found = find_expired(lines, rs, context)
    gone = {f.line for f in expired_found}
    pairs = [f for f in find_pairs(lines, rs, context) if f.line not in gone and f.keep not in gone]
    return expired_found + pairs
