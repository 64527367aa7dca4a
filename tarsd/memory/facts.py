"""Telling the same fact from a different one: dedup for remember, matching for forget.

A new fact is compared with the lines already in a memory file in two steps.

1. Features (cheap, no model). Normalisation (case, punctuation, contractions, number words,
   British/American spellings, a few synonyms, plural s) gives the *content words*; beside
   them the *slots* that make two similar sentences say different things are pulled out:
   numbers and dates, names (capitalised words), quoted text, negation, qualifiers (always,
   used to, was, can...), opposite words (like/dislike, on/off, older/younger...), whose
   something is (Ben's), and the order of names and of the words around a relation (than,
   over, from, to).
2. Verdict. The same content words and the same slots: a *duplicate* (a restatement). Close
   but differing in anything: a *possible update*, with the difference named. Not close: *new*.

Closeness is text overlap of the topic words (content words less the slots), character
similarity, and, when the embedding model is loaded, the cosine of the two sentences. The
model only ever widens what counts as close (more possible updates found) or vetoes a
duplicate; it never makes one. So a daemon whose model is still loading may ask about an
update it would otherwise have missed, but never refuses a fact as a false duplicate.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from tarsd.memory.provenance import strip as strip_stamp

DUPLICATE = "duplicate"
UPDATE = "possible_update"
NEW = "new"

# Close enough to be "the same thing, perhaps changed" (any one of them suffices).
TOPIC_OVERLAP = 0.6  # Dice coefficient of the topic words
TEXT_RATIO = 0.8  # difflib ratio of the normalised texts
RELATED_COSINE = 0.8  # MiniLM: locker 14 vs 12: 0.95; cat vs dog named Perry: 0.88; peanut vs shellfish allergy: 0.46
# With the model loaded, a lexical duplicate whose sentences are further apart than this is
# not trusted (restatements score 0.79-0.97 on the labelled set).
DUPLICATE_VETO_COSINE = 0.65
# Lines compared in full with a new fact: the closest ones by overlap and cosine.
CANDIDATES = 8

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_WIKILINK = re.compile(r"\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")
_MDLINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|~~|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w))")
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<![\w'])'([^']+)'(?![\w])|`([^`]+)`")
_TOKEN = re.compile(
    r"""\d{1,3}(?:,\d{3})+(?:\.\d+)?      # 1,000 or 12,500.50
      | \d+(?:[.:/-]\d+)+                  # 6:30, 3.5, 555-0142, 2026-11-22
      | [^\W_]+(?:'[^\W_]+)*               # words, apostrophes inside (don't, Ben's)
      | [:;,.!?&=()]                       # punctuation that carries structure
    """,
    re.X,
)

STOPWORDS = frozenset(
    """a an the i me my mine myself we us our ours you your yours am is are be been being has have having do does
    of in on at for by as with about that this these those it its and also too very really actually just please
    user users name named names called call calls number use uses using ever which who whose what there here so
    remember note aka etc""".split()
)
NEGATORS = frozenset("not no never none nobody nothing nowhere neither nor without non nope".split())
QUALIFIERS = frozenset(
    """always usually often sometimes occasionally rarely seldom mostly generally normally typically only mainly
    might must should can could will would shall was were had did used formerly previously former ex now currently
    still anymore again soon later yet already maybe perhaps probably likely""".split()
)
# Opposite words: (axis, side). Kept as content words; left out of the topic, so "likes tea"
# and "dislikes tea" are close (a possible update) rather than unrelated.
_OPPOSITES = [
    ("like love enjoy adore prefer fond fan favourite", "dislike hate loathe detest despise avoid"),
    ("", "off"),  # "on" is a stopword: "notifications on" and "notifications off" differ by "off"
    ("true yes", "false"),
    ("allow allowed permit permitted", "forbid forbidden ban banned"),
    ("enable enabled", "disable disabled"),
    ("include included", "exclude excluded"),
    ("older elder", "younger"),
    ("bigger larger", "smaller"),
    ("taller", "shorter"),
    ("faster quicker", "slower"),
    ("more", "less fewer"),
    ("most", "least"),
    ("best", "worst"),
    ("better", "worse"),
    ("early earlier", "late later"),
    ("hot warm", "cold cool"),
    ("left", "right"),
    ("open", "closed shut"),
    ("before", "after"),
    ("above over", "below under"),
    ("up", "down"),
    ("start begin", "stop end finish"),
    ("light", "dark"),
    ("morning", "evening night"),
    ("summer", "winter"),
    ("first", "last"),
    ("new", "old"),
]
POLES: dict[str, tuple[int, int]] = {}
for _axis, (_plus, _minus) in enumerate(_OPPOSITES):
    POLES.update({word: (_axis, 0) for word in _plus.split()})
    POLES.update({word: (_axis, 1) for word in _minus.split()})
# Words around which order matters: "tea over coffee" is not "coffee over tea".
RELATIONAL = frozenset(
    """than over under before after from to into vs versus instead rather above below prefer more less older younger
    bigger smaller taller shorter faster slower better worse owe""".split()
)
COPULAS = frozenset({"is", "are", "am", "was", "were", ":", "="})
_COORDINATION = frozenset({"and", "or", ",", "&"})

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_ORDINALS = {
    w: str(i + 1)
    for i, w in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
        "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split()
    )
}
_ORDINAL_SUFFIX = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_MONTHS = {
    **{m[:3]: m for m in "january february march april june july august september october november december".split()},
    **{m: m for m in "january february march april may june july august september october november december".split()},
    "sept": "september",
}
_WEEKDAYS = {d: d for d in "monday tuesday wednesday thursday friday saturday sunday".split()} | {"tues": "tuesday", "thurs": "thursday"}
# Spellings and a few plain synonyms, to one form.
_CANONICAL = {
    "favorite": "favourite",
    "fave": "favourite",
    "fav": "favourite",
    "color": "colour",
    "gray": "grey",
    "center": "centre",
    "theater": "theatre",
    "organization": "organisation",
    "realize": "realise",
    "mom": "mother",
    "mum": "mother",
    "mommy": "mother",
    "mummy": "mother",
    "dad": "father",
    "daddy": "father",
    "kid": "child",
    "children": "child",
    "hubby": "husband",
    "cellphone": "phone",
    "mobile": "phone",
    "cell": "phone",
    "telephone": "phone",
    "occupation": "job",
    "profession": "job",
    "reside": "live",
    "tv": "television",
    "bike": "bicycle",
    "ok": "okay",
}
_CONTRACTIONS = {"'m": "am", "'re": "are", "'ve": "have", "'ll": "will", "'d": "would"}
_DATES = frozenset(_MONTHS.values()) | frozenset(_WEEKDAYS.values())
_NOT_NAMES = STOPWORDS | NEGATORS | QUALIFIERS | RELATIONAL | POLES.keys() | {"i", "and", "or", "but", "if", "when", "every"}


@dataclass(frozen=True, slots=True)
class Fact:
    """What a line says, for comparison. Built once per distinct text (cached)."""

    text: str  # the line as shown: no bullet, no stamp
    key: str  # lower case, punctuation folded: the identity of a line (and its vector's cache key)
    tokens: tuple[str, ...]  # normalised words in order, punctuation that carries structure kept
    content: frozenset[str]  # the words that carry meaning
    topic: frozenset[str]  # content less numbers, names, dates and opposite words
    negated: bool
    qualifiers: frozenset[str]
    poles: frozenset[tuple[int, int]]
    numbers: tuple[str, ...]
    names: tuple[str, ...]  # lower case, in order (a capitalised first word included: it may be a name)
    firm_names: frozenset[str]  # capitalised words inside a sentence or after "Label:": surely names
    name_groups: tuple[frozenset[str], ...]  # names joined by and / or / commas form one group
    owners: frozenset[str]  # names with 's
    quoted: frozenset[str]
    relational: bool
    copula: bool


@lru_cache(maxsize=65536)
def clean(line: str) -> str:
    """The text of a memory line: no bullet, checkbox or provenance stamp, links as their text."""
    text = _BULLET.sub("", strip_stamp(line)).strip()
    text = _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _MDLINK.sub(r"\1", text)
    return " ".join(text.split())


@lru_cache(maxsize=65536)
def key(line: str) -> str:
    """Lower case, punctuation folded, whitespace collapsed: equal keys are the same line."""
    return " ".join(re.sub(r"[^\w\s]", " ", clean(line).lower()).split())


# A memory line is a fact or a rule: a sentence or two. A longer line (a pasted paragraph, a
# hostile 5 MB line) is read on its first LONG_LINE_CHARS for matching, and judge never takes
# it for the same fact as a new one (remember takes facts of up to MAX_FACT_CHARS).
LONG_LINE_CHARS = 4000
MAX_FACT_CHARS = 2000


@lru_cache(maxsize=65536)
def features(line: str) -> Fact:
    text = clean(line)
    if len(text) <= LONG_LINE_CHARS:
        return _features(text)
    return replace(_features(text[:LONG_LINE_CHARS]), text=text, key=key(line))


@lru_cache(maxsize=16384)
def _features(text: str) -> Fact:
    plain = _EMPHASIS.sub("", text).replace("’", "'").replace("‘", "'")
    quoted = frozenset(" ".join(next(g for g in m.groups() if g is not None).lower().split()) for m in _QUOTED.finditer(plain))
    raw = [m.group(0) for m in _TOKEN.finditer(plain)]
    tokens: list[str] = []  # normalised, in order
    names: list[tuple[int, str, bool]] = []  # (position in tokens, name, firm: not the first word of a sentence)
    owners: set[str] = set()  # words with 's
    negations = 0
    qualifiers: set[str] = set()
    poles: set[tuple[int, int]] = set()
    numbers: list[str] = []
    dates: set[str] = set()
    previous = ""
    for index, word in enumerate(raw):
        if not word[0].isalnum():
            tokens.append(word)
            previous = word
            continue
        following = raw[index + 1] if index + 1 < len(raw) else ""
        parts, possessive = _split_contraction(word.lower())
        first_word = previous in ("", ".", "!", "?", ";", "(")
        is_name = _is_name(word, parts[0], first_word or previous == ":", following)
        for number, part in enumerate(parts):
            canonical = _canonical(part, word, following, tokens)
            if canonical is None:
                continue
            if number == 0 and possessive:
                owners.add(canonical)
            if number == 0 and is_name:
                names.append((len(tokens), canonical, not first_word))
            if canonical in NEGATORS:
                negations += 1
            elif canonical in QUALIFIERS:
                qualifiers.add(canonical)
            elif canonical in STOPWORDS:
                continue
            else:
                if canonical in POLES:
                    poles.add(POLES[canonical])
                if any(c.isdigit() for c in canonical):
                    numbers.append(canonical)
                if canonical in _DATES:
                    dates.add(canonical)
            tokens.append(canonical)
        previous = word
    _merge_compound_numbers(tokens, numbers)  # leaves "" where a word was merged: name positions hold
    words = [t for t in tokens if t[:1].isalnum()]
    content = frozenset(t for t in words if t not in NEGATORS and t not in QUALIFIERS and t not in STOPWORDS)
    # Names found mid-sentence (or after "Label:") are values; a capitalised first word may
    # just be a verb ("Lives in Dublin"), so it stays in the topic.
    firm_names = {n for _, n, firm in names if firm}
    topic = frozenset(t for t in content if t not in firm_names and t not in dates and t not in POLES and not any(c.isdigit() for c in t))
    return Fact(
        text=text,
        key=" ".join(re.sub(r"[^\w\s]", " ", text.lower()).split()),
        tokens=tuple(t for t in tokens if t),
        content=content,
        topic=topic,
        negated=negations % 2 == 1,
        qualifiers=frozenset(qualifiers),
        poles=frozenset(poles),
        numbers=tuple(numbers),
        names=tuple(n for _, n, _ in names),
        firm_names=frozenset(firm_names),
        name_groups=_name_groups(tokens, [(position, n) for position, n, _ in names]),
        owners=frozenset(owners),
        quoted=quoted,
        relational=any(t in RELATIONAL for t in words),
        copula=any(t in COPULAS for t in tokens) or any(w.lower() in COPULAS for w in raw),
    )


def _split_contraction(lower: str) -> tuple[list[str], bool]:
    """(words, is_possessive): don't -> do not, I'm -> i am, Ben's -> ben (possessive)."""
    if "'" not in lower:
        if lower == "cannot":
            return ["can", "not"], False
        return [lower], False
    if lower.endswith("n't"):
        base = {"can": "can", "ca": "can", "won": "will", "wo": "will", "shan": "shall", "ain": "is"}.get(lower[:-3], lower[:-3])
        return [base, "not"], False
    if lower.endswith("'s"):
        return [lower[:-2]], True
    for ending, word in _CONTRACTIONS.items():
        if lower.endswith(ending):
            return [lower[: -len(ending)], word], False
    return [lower.replace("'", "")], False


def _is_name(word: str, lower: str, sentence_start: bool, following: str) -> bool:
    if lower == "i" or not word[0].isalpha():
        return False
    if word.isupper() and len(word) > 1:
        return True  # an acronym: PIN, GP, USB
    if any(c.isupper() for c in word[1:]):
        return True  # iPhone, McDonald
    if not word[0].isupper():
        return False
    if sentence_start:
        # "Dog: Perry" labels a value; "Never answer..." starts a rule: neither is a name.
        return following != ":" and lower not in _NOT_NAMES and _stem(lower) not in _NOT_NAMES
    return True


def _canonical(part: str, original: str, following: str, tokens: list[str]) -> str | None:
    if not part:
        return None
    if part in _NUMBER_WORDS:
        return _NUMBER_WORDS[part]
    if part in _ORDINALS:
        return _ORDINALS[part]
    if match := _ORDINAL_SUFFIX.match(part):
        return match.group(1)
    if part.replace(",", "").isdigit():
        return part.replace(",", "")
    if part == "may":
        # The month only when it looks like one ("May", "3 may"); otherwise the modal verb.
        near_number = following[:1].isdigit() or bool(tokens and tokens[-1][:1].isdigit())
        return "may" if original[0] == "M" or near_number else "might"
    if part in _MONTHS:
        return _MONTHS[part]
    if part in _WEEKDAYS:
        return _WEEKDAYS[part]
    if part in _CANONICAL:
        return _CANONICAL[part]
    if part in STOPWORDS or part in NEGATORS or part in QUALIFIERS or part in POLES or part in RELATIONAL:
        return part
    stem = _stem(part)
    return _CANONICAL.get(stem, stem)


def _stem(word: str) -> str:
    """Plural and third-person s only: tense and -ing stay (worked is not work)."""
    if any(c.isdigit() for c in word):
        return word
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
        return word[:-1]
    return word


def _merge_compound_numbers(tokens: list[str], numbers: list[str]) -> None:
    """twenty one -> 21 (the words arrive as "twenty" and "1"); the merged "1" becomes ""."""
    for index, token in enumerate(tokens):
        if token in _TENS:
            value = _TENS[token]
            if index + 1 < len(tokens) and tokens[index + 1].isdigit() and int(tokens[index + 1]) < 10:
                numbers.remove(tokens[index + 1])
                value += int(tokens[index + 1])
                tokens[index + 1] = ""
            tokens[index] = str(value)
            numbers.append(str(value))


def _name_groups(tokens: list[str], names: list[tuple[int, str]]) -> tuple[frozenset[str], ...]:
    """Names in order; names next to each other or joined by and / or / commas are one group
    ("Spanish and French" is the same as "French and Spanish", "Anna hired Ben" is not "Ben hired Anna")."""
    groups: list[set[str]] = []
    last = -2
    for position, name in names:
        between = tokens[last + 1 : position] if last >= 0 else None
        if between is not None and all(t in _COORDINATION or not t for t in between):
            groups[-1].add(name)
        else:
            groups.append({name})
        last = position
    return tuple(frozenset(g) for g in groups)


# ---- comparing two facts ----


@dataclass(frozen=True, slots=True)
class Comparison:
    kind: str  # duplicate | possible_update | new
    reason: str = ""  # for a possible update: what differs, for people
    closeness: float = 0.0


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


def closeness(new: Fact, old: Fact, cosine: float | None = None) -> float:
    """How close two lines are, 0..1: topic overlap, or content overlap, or the cosine."""
    topic = dice(new.topic, old.topic) if new.topic or old.topic else dice(new.content, old.content)
    return max(topic, cosine if cosine is not None else 0.0)


def compare(new: Fact, old: Fact, cosine: float | None = None) -> Comparison:
    """Is ``new`` the same fact as ``old``, a possible update of it, or something new?"""
    near = closeness(new, old, cosine)
    if new.key == old.key:
        return Comparison(DUPLICATE, "", 1.0)
    differences = _differences(new, old)
    if not differences and (cosine is None or cosine >= DUPLICATE_VETO_COSINE):
        return Comparison(DUPLICATE, "", max(near, 0.9))
    related = (
        new.content == old.content
        # The same name in both ("my dog's name is Perry", "Pets: Perry (beagle)"): the same
        # subject, whatever the words around it.
        or bool(new.firm_names & old.firm_names)
        or (dice(new.topic, old.topic) >= TOPIC_OVERLAP if new.topic or old.topic else dice(new.content, old.content) >= TOPIC_OVERLAP)
        or (cosine is not None and cosine >= RELATED_COSINE)
        or difflib.SequenceMatcher(None, new.key, old.key).ratio() >= TEXT_RATIO
    )
    if not related:
        return Comparison(NEW, "", near)
    return Comparison(UPDATE, differences[0] if differences else "the model reads them as different", near)


def same_fact(new: Fact, old: Fact, cosine: float | None = None) -> bool:
    """Whether ``compare`` would call the two a duplicate, without working out how close they are
    otherwise (the memory review asks this of thousands of pairs)."""
    if new.key == old.key:
        return True
    return not _differences(new, old) and (cosine is None or cosine >= DUPLICATE_VETO_COSINE)


def _differences(new: Fact, old: Fact) -> list[str]:
    """What makes two lines say different things, most telling first; empty for a restatement."""
    found = []
    if Counter(new.numbers) != Counter(old.numbers):
        found.append(_pair("the numbers differ", new.numbers, old.numbers))
    old_words = old.content | set(old.names)
    new_words = new.content | set(new.names)
    names_new = [n for n in new.firm_names if n not in old_words]
    names_old = [n for n in old.firm_names if n not in new_words]
    if names_new or names_old:
        found.append(_pair("the names differ", names_new, names_old))
    if new.negated != old.negated:
        found.append("one of them is negated")
    if new.poles != old.poles:
        ours, theirs = new.content & POLES.keys(), old.content & POLES.keys()
        found.append(_pair("opposite words", sorted(ours - theirs), sorted(theirs - ours)))
    if new.qualifiers != old.qualifiers:
        found.append(_pair("the qualifiers differ", sorted(new.qualifiers - old.qualifiers), sorted(old.qualifiers - new.qualifiers)))
    if new.quoted != old.quoted:
        found.append("the quoted text differs")
    owners = _owner_swaps(new, old) + _owner_swaps(old, new)
    if owners:
        found.append("whose it is differs (" + ", ".join(sorted(set(owners))) + ")")
    only_new, only_old = sorted(new.content - old.content), sorted(old.content - new.content)
    if only_new or only_old:
        if only_new and only_old:
            found.append(_pair("different words", only_new, only_old))
        elif only_new:
            found.append("it adds: " + ", ".join(only_new[:5]))
        else:
            found.append("it leaves out: " + ", ".join(only_old[:5]))
    if not found and _order_differs(new, old):
        found.append("the same words in another order")
    return found


def _owner_swaps(a: Fact, b: Fact) -> list[str]:
    """Names that own something in ``a`` ("Ben's sister") but stand alone in ``b`` ("Ben is...").
    Common nouns do not count: "my dog's name" and "my dog is called" say the same."""
    names = set(a.names) | set(b.names)
    return [w for w in a.owners - b.owners if w in names and (w in b.content or w in b.names)]


def _order_differs(new: Fact, old: Fact) -> bool:
    """Order matters around relations ("tea over coffee") and between names when no copula
    allows a swap ("Anna hired Ben"; but "My GP is Dr Byrne" = "Dr Byrne is my GP")."""
    if new.relational or old.relational:
        # Numbers and dates keep their own order ("14 March" is "March 14th").
        common = {t for t in new.content & old.content if t not in _DATES and not any(c.isdigit() for c in t)}
        if [t for t in _first_occurrences(new.tokens) if t in common] != [t for t in _first_occurrences(old.tokens) if t in common]:
            return True
    if not (new.copula or old.copula):
        shared = set(new.names) & set(old.names)
        ours = [g & shared for g in new.name_groups if g & shared]
        theirs = [g & shared for g in old.name_groups if g & shared]
        if len(ours) > 1 and ours != theirs:
            return True
    return False


def _first_occurrences(tokens: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(t for t in tokens if t[:1].isalnum()))


def _pair(what: str, ours: Sequence[str], theirs: Sequence[str]) -> str:
    left = ", ".join(ours) or "none"
    right = ", ".join(theirs) or "none"
    return f"{what} ({left} here, {right} in the line)"


# ---- a fact against a whole file ----


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # duplicate | possible_update | new
    index: int = -1  # which line (of those given) it is the same as or resembles
    reason: str = ""
    closeness: float = 0.0


def judge(fact: str, lines: Sequence[str], cosines: Sequence[float] | None = None) -> Verdict:
    """Compare a new fact with every line: a duplicate if any line says the same, else the
    closest possible update, else new. ``cosines`` (one per line, NaN where unknown) come
    from the embedding model when it is loaded."""
    if not lines:
        return Verdict(NEW)
    new = features(fact)
    # A line far longer than any fact is not compared: it is not the same fact, nor an update.
    comparable = [i for i, line in enumerate(lines) if len(line) <= LONG_LINE_CHARS]
    facts = {i: features(lines[i]) for i in comparable}
    cosine = [None if cosines is None or i >= len(cosines) or cosines[i] != cosines[i] else float(cosines[i]) for i in range(len(lines))]
    scored = sorted(comparable, key=lambda i: closeness(new, facts[i], cosine[i]), reverse=True)
    candidates = dict.fromkeys([i for i in comparable if facts[i].key == new.key] + scored[:CANDIDATES])
    best_update: Verdict | None = None
    for i in candidates:
        result = compare(new, facts[i], cosine[i])
        if result.kind == DUPLICATE:
            return Verdict(DUPLICATE, i, "", result.closeness)
        if result.kind == UPDATE and (best_update is None or result.closeness > best_update.closeness):
            best_update = Verdict(UPDATE, i, result.reason, result.closeness)
    return best_update or Verdict(NEW)


def match_score(query: str, line: str, cosine: float | None = None) -> float:
    """How well a line matches what the user asked to forget, 0..1: the share of the query's
    words the line holds (a quoted part of the line scores high), or the cosine."""
    wanted, have = features(query), features(line)
    if not wanted.key:
        return 0.0
    if wanted.key == have.key:
        return 1.0
    words = wanted.content or frozenset(t for t in wanted.tokens if t[:1].isalnum())
    line_words = have.content | frozenset(t for t in have.tokens if t[:1].isalnum())
    cover = len(words & line_words) / len(words) if words else 0.0
    score = 0.8 * cover + 0.2 * dice(words, have.content)
    if f" {wanted.key} " in f" {have.key} ":
        score = max(score, 0.9)
    return max(score, cosine if cosine is not None else 0.0)
