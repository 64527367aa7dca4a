"""A memory line read for the review (tarsd/memory/review_detect.py): who it is about, what about
them, what it says of that, and whether it is bound to a time.

The review compares lines two by two, as ``remember`` compares a new fact with the file (the same
judge, tarsd/memory/facts.py), and asks more of a pair than remember does: are they the same fact
in other words (a duplicate), two values of one thing (the newer supersedes the older), or about
different things? So each line is read into:

- ``normal``: the text with the things people write in several ways written one way: units
  ("5 km", "5km", "5 kilometres"), clock times ("9.30am", "09:30"), dates ("14 March", "March
  14th", "2026-03-14"), money ("€1,200", "1200 euro") and phone numbers ("087 555 0142",
  "0875550142"). The judge reads this text;
- ``subject``: the person a line is about ("my sister Anna", "Anna (sister)", "Anna's number"),
  "" for the user;
- ``cues``: words saying *what* about the subject, folded to a few general predicates of
  personal facts ("lives in", "is based in", "moved to" are one; "works at" and "joined" are one,
  "works as" and "became a" another), and ``words``: the other words of the line, stemmed;
- ``values``: what the line says of it: names, numbers with their units, dates, times;
- time: the dates named, words of transient state ("this week", "currently", "until Friday"),
  event words (an appointment, a flight) and life events that stay true (born, married, since).

Nothing here is tied to a file's own vocabulary but ``Names``: the capitalised words seen in the
file, so a line typed all in lower case still has its names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date
from functools import lru_cache

from py_rust_stemmers import SnowballStemmer

from tarsd.memory import facts

_STEMMER = SnowballStemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _STEMMER.stem_word(word.lower())


# ---- one way of writing units, times, dates, money and phone numbers ----

_MONTHS = {
    m[:3]: i + 1 for i, m in enumerate("january february march april may june july august september october november december".split())
}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?"
    r"|dec(?:ember)?)"
)
_ORD = r"(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}}){_ORD}(?:\s+of)?\s+{_MONTH}\b\.?(?:,?\s+(\d{{4}}))?", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}}){_ORD}\b(?:,?\s+(\d{{4}}))?", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_CLOCK = re.compile(r"\b(\d{1,2})(?:([:.])(\d{2}))?\s*(a\.?m\.?|p\.?m\.?)(?![a-z])|\b(\d{1,2}):(\d{2})\b", re.I)
_UNITS = [
    (re.compile(r"\b(\d+(?:\.\d+)?)\s?(?:km|kms|kilomet(?:er|re)s?|k)\b", re.I), "km"),
    (re.compile(r"\b(\d+(?:\.\d+)?)\s?(?:kg|kgs|kilos?|kilogram(?:me)?s?)\b", re.I), "kg"),
    (re.compile(r"\b(\d+(?:\.\d+)?)\s?(?:mi|miles?)\b", re.I), "mi"),
    (re.compile(r"\b(\d+(?:\.\d+)?)\s?(?:lbs?|pounds?)\b", re.I), "lb"),
    (re.compile(r"\b(\d+(?:\.\d+)?)\s?(?:mins?|minutes?)\b", re.I), "min"),
    (re.compile(r"\b(\d+(?:\.\d+)?)\s?(?:hrs?|hours?)\b", re.I), "h"),
]
# An age: "nine years old" is "nine" ("Cosmo is nine").
_AGE_NUMBER = "|".join("one two three four five six seven eight nine ten eleven twelve".split())
_AGE = re.compile(rf"\b(\d{{1,3}}|{_AGE_NUMBER})\s+years?\s+old\b", re.I)
_MONEY = [
    re.compile(r"(?:€|\beur\s?)\s?(\d[\d,]*(?:\.\d\d)?)", re.I),
    re.compile(r"\b(\d[\d,]*(?:\.\d\d)?)\s?(?:€|euros?\b|eur\b)", re.I),
]
_PHONE = re.compile(r"(?<![\w-])\+?(?:\d{2,5}(?:[ -]\d{2,7}){1,3}|\d{7,})(?![\d-])")
_DIGITS_ONLY = re.compile(r"\D")


@dataclass(frozen=True, slots=True)
class DateMention:
    month: int
    day: int
    year: int | None  # None: not said (a birthday, or this year's or next)

    def on(self, year: int) -> date | None:
        try:
            return date(year, self.month, self.day)
        except ValueError:
            return None


def _date_token(month: int, day: int, year: int | None) -> str:
    return f"{year:04d}-{month:02d}-{day:02d}" if year else f"{month:02d}-{day:02d}"


def normalise(text: str) -> tuple[str, tuple[DateMention, ...]]:
    """The text with units, times, dates, money and phone numbers written one way, and the dates it names."""
    mentions: list[DateMention] = []

    def dated(month: int, day: int, year: str | None) -> str:
        if not 1 <= month <= 12 or not 1 <= day <= 31:
            return f"{day} {month}"
        mentions.append(DateMention(month, day, int(year) if year else None))
        return "on" + _date_token(month, day, int(year) if year else None).replace("-", "")

    text = _ISO.sub(lambda m: dated(int(m.group(2)), int(m.group(3)), m.group(1)), text)
    text = _DAY_MONTH.sub(lambda m: dated(_MONTHS[m.group(2)[:3].lower()], int(m.group(1)), m.group(3)), text)
    text = _MONTH_DAY.sub(lambda m: dated(_MONTHS[m.group(1)[:3].lower()], int(m.group(2)), m.group(3)), text)
    text = _CLOCK.sub(_clock, text)
    for pattern in _MONEY:
        text = pattern.sub(lambda m: "eur" + m.group(1).replace(",", ""), text)
    for pattern, unit in _UNITS:
        text = pattern.sub(lambda m, u=unit: m.group(1) + u, text)
    text = _PHONE.sub(_phone, text)
    text = _AGE.sub(lambda m: m.group(1), text)
    return text, tuple(mentions)


def _clock(match: re.Match) -> str:
    if match.group(5) is not None:  # 18:30, 09:30
        hour, minute = int(match.group(5)), int(match.group(6))
        return f"at{hour:02d}{minute:02d}" if hour < 24 and minute < 60 else match.group(0)
    hour, minute = int(match.group(1)), int(match.group(3) or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return match.group(0)
    afternoon = match.group(4).lower().startswith("p")
    hour = hour % 12 + (12 if afternoon else 0)
    return f"at{hour:02d}{minute:02d}"


def _phone(match: re.Match) -> str:
    digits = _DIGITS_ONLY.sub("", match.group(0))
    return f"tel{digits}" if len(digits) >= 7 else match.group(0)


# ---- what a line is about ----

# Words for people around the user: "my sister Anna", "Anna (neighbour)". Not part of what is said of them.
RELATIONS = frozenset(
    """sister brother mother mum mom father dad parent cousin neighbour neighbor colleague coworker aunt uncle friend
    flatmate roommate housemate godmother godfather godson goddaughter mentor wife husband son daughter niece nephew
    grandmother grandfather granny grandma grandpa stepmother stepfather sibling pal bestie""".split()
)
# A handful of predicates personal facts are written with, each folded to one cue. Verbs that say a
# change ("moved", "joined", "became") carry the cue of the state they lead to. A cue followed by a
# preposition is read with it: "works at" (an employer) is not "works as" (a job).
_CUE_WORDS = {
    "live": "live",
    "base": "live",
    "home": "live",
    "resid": "live",
    "reloc": "live",
    "settl": "live",
    "employ": "employer",
    "employer": "employer",
    "firm": "employer",
    "becam": "role",
    "becom": "role",
    "retrain": "role",
    "promot": "role",
    "role": "role",
    "titl": "role",
    "trade": "role",
    "profess": "role",
    "occup": "role",
    "kid": "kids",
    "child": "kids",
    "children": "kids",
    "babi": "kids",
    "number": "number",
    "phone": "phone",
    "birthday": "birthday",
    "born": "birthday",
    "drink": "drink",
    "order": "drink",
    "manag": "manager",
    "boss": "manager",
    "weigh": "weight",
    "weight": "weight",
    "run": "run",
    "age": "age",
    "turn": "age",
    "eat": "diet",
    "diet": "diet",
    "partner": "partner",
    "marri": "partner",
    "allerg": "allergy",
    "allergi": "allergy",
    "intoler": "allergy",
}
_CANNOT = frozenset({"can't", "can’t", "cannot", "mustn't", "won't", "doesn't", "don't"})
_TAKE = frozenset({"have", "eat", "drink", "stand", "touch"})
_CUE_WITH = {
    ("work", "at"): "employer",
    ("work", "for"): "employer",
    ("work", "as"): "role",
    ("work", "in"): "team",
    ("join", ""): "employer",
    ("start", "at"): "employer",
    ("start", "with"): "employer",
    ("move", "to"): "live",
    ("move", "in"): "live",
    ("move", "back"): "live",
    ("live", "with"): "partner",
    ("report", "to"): "manager",
    ("switch", "job"): "employer",
    ("job", "at"): "employer",
    ("job", "titl"): "role",
    ("job", "title"): "role",
    ("parent", "of"): "kids",
}
# Words that say the value changed, and no more ("now", "new"); left out of what the line is about.
CHANGE_WORDS = frozenset("now new newly switch switched chang changed becam upgrad got up down went today anymore longer since".split())
PAST_WORDS = frozenset("used formerly previously former ex once originally".split())
# The copula and an article make "is a nurse", "is now a teacher" a statement of what someone is.
COPULA = _COPULA = frozenset("is are am was be".split())
_ARTICLES = frozenset("a an".split())
# Value positions: a name after these is what a line says, not whom it is about.
_VALUE_BEFORE = frozenset(
    "at for by to in from with of called named is are was were dr doctor mr mrs ms st : on as into near visit visiting than over "
    "the a an".split()
)
# Words the time checks and the cues read, known even when a file uses them once: a typo of one is read as it.
KNOWN_WORDS = (
    "appointment flight party booked arriving arrives delivery deadline meeting haircut conference concert wedding "
    "interview visiting until currently moment temporarily weekend tomorrow tonight today service reservation "
    "lives living relocated moved works working employed employer joined started retrained promoted became parent "
    "children allergic allergy birthday number phone married graduated anniversary"
).split()
PREPOSITIONS = _PREPOSITIONS = frozenset("at for with as in to of back into on by".split())
_BASE_VERBS = frozenset({"live", "work"})  # a verb without its -s: its subject is plural, never the user's own line
_NUMBER_WORDS = {
    word: str(number)
    for number, word in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split())
}
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|[:()]")
_LETTERS = re.compile(r"[^\W\d_]+")
# The subject of a line about a person the review cannot name ("my father imoegn relocated to kyoto"):
# never the same as any other line's, so such a line is never taken for the same fact as another.
SOMEONE = "?"


TYPO_LENGTH = 5  # words this long or longer may be read through a typo
TYPO_SOURCE = 3  # ... as a word the file uses at least this often


def _deletions(word: str) -> set[str]:
    return {word} | {word[:k] + word[k + 1 :] for k in range(len(word))}


# A letter changed makes another word of a short one as often as a typo ("loves", "lives"; "tasks",
# "tanks"): below this length only a letter dropped, added or two swapped is read as a typo.
SUBSTITUTION_LENGTH = 7


def one_typo(a: str, b: str) -> bool:
    """One letter dropped, added or two swapped; or, in a word of SUBSTITUTION_LENGTH letters or more, changed."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [k for k in range(len(a)) if a[k] != b[k]]
        if len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]:
            return True
        return len(diff) == 1 and len(a) >= SUBSTITUTION_LENGTH
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:k] + long[k + 1 :] == short for k in range(len(long)))


class Names:
    """Which words are names in a file: the capitalised words seen inside a sentence, which a
    line in lower case ("yara's home is in lisbon") then has too, and words seen in lower case
    inside a sentence, which a capitalised first word ("Lives in Cork") then is not."""

    def __init__(self, texts: list[str]):
        capitalised: dict[str, int] = {}
        lower: set[str] = set()
        firsts: list[tuple[str, str]] = []  # (a capitalised first word, the token after it)
        counts: dict[str, int] = {}
        for text in texts:
            words = _WORD.findall(text)
            for word in words:
                if word[:1].isalpha():
                    counts[word.lower()] = counts.get(word.lower(), 0) + 1
            for index, word in enumerate(words):
                bare = word.split("'")[0].split("’")[0]
                if not bare[:1].isalpha():
                    continue
                if bare[:1].isupper():
                    if index > 0 and words[index - 1] not in ("(", ":"):
                        capitalised[bare.lower()] = capitalised.get(bare.lower(), 0) + 1
                    elif index == 0:
                        firsts.append((word, words[1] if len(words) > 1 else ""))
                elif not text.islower():
                    lower.add(bare.lower())
        self.common = frozenset(lower)
        self.names = frozenset(word for word in capitalised if word not in lower and word not in facts.STOPWORDS)
        # A first word that owns something, stands before a bracket or before a verb is a name too:
        # "Tomas (uncle) is a chef" tells that "Tomas: birthday 3 May" is about Tomas.
        self.names |= frozenset(
            word.split("'")[0].split("’")[0].lower() for word, following in firsts if self._first_is_name(word, following)
        )
        # Words the file uses often, to read a typo as the word it misspells ("wokrs", "relocatted").
        for word in (*KNOWN_WORDS, *RELATIONS):
            counts[word] = counts.get(word, 0) + TYPO_SOURCE
        self.counts = counts
        self._near: dict[str, list[str]] = {}
        for word, count in counts.items():
            if count >= TYPO_SOURCE and len(word) >= TYPO_LENGTH - 1:
                for key in _deletions(word):
                    self._near.setdefault(key, []).append(word)

    def fix(self, word: str) -> str:
        """A rare word one typo away from a word the file uses often is read as that word."""
        if len(word) < TYPO_LENGTH or self.counts.get(word, 0) >= TYPO_SOURCE or word in self.names:
            return word
        found = {other for key in _deletions(word) for other in self._near.get(key, ()) if other != word and one_typo(word, other)}
        return max(found, key=lambda other: (self.counts[other], other)) if found else word

    def _first_is_name(self, word: str, following: str) -> bool:
        bare = word.split("'")[0].split("’")[0]
        low = bare.lower()
        if low in self.common or low in facts.STOPWORDS or low in RELATIONS or stem(low) in _CUE_WORDS or bare.isupper():
            return False
        possessive = bare != word
        verb = following[:1].islower() and following.endswith("s") and following in self.common and not following.endswith("ss")
        return possessive or following == "(" or verb

    def is_name(self, word: str, first: bool, following: str = "") -> bool:
        """Whether ``word`` names someone or something. A capitalised first word is a name when the
        file has it as one, or when it owns something, stands before a bracket, or before a verb
        ("Anna lives", "Ben's"); otherwise it is taken for a word ("Gym locker: 14", "Diet: vegan")."""
        bare = word.split("'")[0].split("’")[0]
        low = bare.lower()
        if low in RELATIONS or low in facts.STOPWORDS or low in facts.NEGATORS or low in facts.QUALIFIERS:
            return False
        if not bare[:1].isupper():
            return low in self.names
        if bare.isupper() and len(bare) > 1:
            return True  # GP, PIN: an acronym names something
        if not first:
            return low not in self.common or low in self.names
        return low in self.names or self._first_is_name(word, following)


@dataclass(frozen=True, slots=True)
class Reading:
    """A memory line as the review compares it."""

    text: str  # as shown: no bullet, no stamp
    normal: str  # units, times, dates, money, phone numbers written one way
    fact: facts.Fact  # the judge's reading of ``normal``
    subject: str  # whom it is about (a name, lower case); "" for the user
    cues: frozenset[str]  # what about them, as folded predicates (live, employer, role, ...)
    words: frozenset[str]  # the other words of what it is about, stemmed
    values: frozenset[str]  # names, numbers (with units), dates, times
    value_words: frozenset[str]  # what follows "is a" / "works as a" / "became a": a job, a kind
    change: bool  # says a value changed ("moved to", "new", "now")
    past: bool  # says how things were ("used to", "formerly")
    negated: bool
    dates: tuple[DateMention, ...]
    label: bool  # "Label: value"
    named_by: frozenset[str]  # values in the attribute's name, before a label's colon or "is" ("Best coffee in Prague: ...")
    related: bool  # it names a person around the user with a word for them ("my sister Anna", "Liam (cousin)")
    form: str  # label ("Gym locker: 14"), copula ("Rent is €900"), verb ("Wants to visit Osaka"): see review_detect.single_valued
    plain: str  # the text in lower case with its typos read as the words they misspell (for the time checks)


def read(text: str, names: Names) -> Reading:
    normal, dates = normalise(text)
    fact = facts.features(normal)
    tokens = _WORD.findall(normal)
    lowered = [t.lower() for t in tokens]
    label = ":" in tokens[:6]
    subject = ""
    values: set[str] = set()
    cues: set[str] = set()
    cue_roots: dict[str, str] = {}  # cue -> the word that gave it
    words: list[str] = []
    value_words: set[str] = set()
    change = past = cannot = False
    after_copula = False
    relation_at: list[int] = []  # where a word for a person around the user stands ("sister", "(uncle)")
    named_at: list[tuple[int, int, str]] = []  # each name in a value place: first token, token after it, the name
    placed: list[tuple[int, str]] = []  # each value and the token it starts at
    index = 0
    while index < len(tokens):
        token, low = tokens[index], lowered[index]
        previous = lowered[index - 1] if index else ""
        following = lowered[index + 1] if index + 1 < len(tokens) else ""
        index += 1
        if token in ("(", ")", ":"):
            after_copula = False
            continue
        if any(c.isdigit() for c in token) or low in _NUMBER_WORDS:
            values.add(_NUMBER_WORDS.get(low, low))
            placed.append((index - 1, _NUMBER_WORDS.get(low, low)))
            if token[:1].isalpha():  # "Ann2": a name with a number in it, which a word for a person may name
                named_at.append((index - 1, index, low))
            if (
                subject
                and previous in _COPULA
                and (token.isdigit() or low in _NUMBER_WORDS)
                and following in ("", "year", "years", "now", ".")
            ):
                cues.add("age")  # "Rafael is seven"
            continue
        if low in _CANNOT and following in _TAKE:
            cues.add("allergy")  # "can't have peanuts" says what "is allergic to peanuts" says
            cannot = True
            index += 1
            continue
        bare = low.split("'")[0].split("’")[0]
        at = index - 1
        if names.is_name(token, at == 0 or previous == "(", tokens[at + 1] if at + 1 < len(tokens) else ""):
            # A run of names is one value ("Vandelay Industries", "Dr Byrne").
            run = [bare]
            while index < len(tokens) and "'" not in tokens[index - 1] and names.is_name(tokens[index], False):
                run.append(lowered[index].split("'")[0].split("’")[0])
                index += 1
            name = " ".join(run)
            in_value_place = previous in _VALUE_BEFORE and not (previous in ("for", "of") and label_before(tokens, index - 1))
            if not subject and not in_value_place:
                subject = name
            else:
                values.add(name)
                named_at.append((at, index, name))
                placed.append((at, name))
            after_copula = False
            continue
        bare = names.fix(bare)
        root = stem(bare)
        following = names.fix(following)
        pair = _CUE_WITH.get((root, following)) or _CUE_WITH.get((root, stem(following)))
        cue = pair or _CUE_WITH.get((root, ""))
        if cue is None and bare not in RELATIONS:
            cue = _CUE_WORDS.get(root)
        if cue is not None and after_copula and pair is None and cue != "role":
            value_words.add(root)  # "is now a product manager": the job, not a manager
            continue
        if cue is not None:
            if pair is not None and following not in _PREPOSITIONS:
                index += 1  # "switched jobs": the second word is part of the cue
            if not subject and bare in _BASE_VERBS and (words or cues) and previous not in ("i", "we", "they"):
                # "Passwords live in Bitwarden", "Runs live in Strava": a base-form verb after a noun that
                # is not "I": that noun is what the line is about, even a noun that reads as a cue ("runs").
                subject, words = " ".join([*cue_roots.values(), *words]), []
                cues.clear()
                cue_roots.clear()
            cues.add(cue)
            cue_roots.setdefault(cue, root)
            if cue == "role":
                after_copula = True
            continue
        if low in facts.STOPWORDS and low not in ("number", "name", "home", "work", "use"):
            if low in _ARTICLES and previous in _COPULA | {"as", "now", "becam", "became"}:
                after_copula = True
            continue
        if bare in RELATIONS:
            relation_at.append(index - 1)
            continue
        if low in _COPULA:
            continue
        if root in PAST_WORDS or bare in PAST_WORDS or (bare == "used" and following == "to"):
            past = True
        elif root in CHANGE_WORDS or bare in CHANGE_WORDS:
            change = True
        elif bare in facts.NEGATORS or bare in facts.QUALIFIERS:
            pass
        elif after_copula:
            value_words.add(root)
        else:
            words.append(root)
    if value_words and not cues:
        # "Anna is a nurse": what a person is, their job; "Usual coffee is a cortado": what kind a thing is.
        cues.add("role" if subject else "kind")
    elif "role" in cues and subject:  # "Lorcan: team lead by trade": all but the cue is what they are
        value_words |= set(words) | {cue_roots[c] for c in cues if c != "role" and c in cue_roots}
        cues, words = {"role"}, []
    if any(value.startswith("tel") for value in values):
        # A phone number can only be a phone number: the value says what the line is about, in any words
        # ("Call Nils on 088 659 2858", "Nils got a new number, 087 278 4116").
        cues = (cues - {"number"}) | {"phone"}
    if "team" in words and cues <= {"employer", "live"}:
        cues, words = {"team"}, [w for w in words if w != "team"]  # "Joined the Billing team", "Team: Mobile"
    if not subject and relation_at:
        # A word for a person ("No cats for Liam (cousin)", "my father imoegn relocated to kyoto") says the
        # line is about that person, not the user: the name beside it, else someone it cannot name.
        beside = [
            name
            for start, end, name in named_at
            if start - 1 in relation_at or (end < len(tokens) and tokens[end] == "(" and end + 1 in relation_at)
        ]
        subject = beside[0] if beside else SOMEONE
        values.discard(subject)
    # What stands before a label's colon or the first "is" names the attribute, values and all: "Best
    # coffee in Prague: Zeno's café" and "Best coffee in Denver: ..." are two attributes, not one changed.
    boundary = next((k for k, low in enumerate(lowered) if (low == ":" and label) or low in _COPULA), -1)
    return Reading(
        text=text,
        normal=normal,
        fact=fact,
        subject=subject,
        cues=frozenset(cues),
        words=frozenset(words),
        values=frozenset(values),
        value_words=frozenset(value_words),
        change=change or any(w in ("moved", "joined", "became", "relocated", "switched") for w in lowered),
        past=past,
        negated=fact.negated and not cannot,
        dates=dates,
        label=label,
        related=bool(relation_at),
        named_by=frozenset(value for at, value in placed if at < boundary and value in values),
        form="label" if label else "copula" if any(low in _COPULA for low in lowered) else "verb",
        plain=_LETTERS.sub(lambda m: names.fix(m.group(0)), text.lower()),
    )


# Predicates whose value is a person: "Manager is Ben", "Lives with Ben" say who, of the user.
PERSON_VALUED = frozenset({"manager", "partner"})


def about_people(readings: list[Reading]) -> list[Reading]:
    """A line of the user's naming a person the file knows (one it names with a word for them
    elsewhere: "Jude (mother) lives in Cork") is about that person, unless what it says of the user
    is a person ("Manager is Jude"): "No peanuts for Jude" says nothing of the user's own food."""
    people = {r.subject for r in readings if r.related and r.subject and r.subject != SOMEONE}
    found = []
    for reading in readings:
        named = sorted(reading.values & people)
        if not reading.subject and named and not reading.cues & PERSON_VALUED:
            reading = replace(reading, subject=named[0], values=reading.values - {named[0]}, named_by=reading.named_by - {named[0]})
        found.append(reading)
    return found


def label_before(tokens: list[str], index: int) -> bool:
    """A name just before a label's colon ("Gift idea for Anna: ...") is whom the line is about."""
    return index + 1 < len(tokens) and tokens[index + 1] == ":"


# ---- time ----

# Words of a state that passes, and how many days a line holding them stays true after it was written.
TRANSIENT = [
    (re.compile(r"\b(today|tonight|this (?:morning|afternoon|evening))\b", re.I), 1),
    (re.compile(r"\btomorrow\b", re.I), 2),
    (re.compile(r"\b(this week(?:end)?|until (?:mon|tues|wednes|thurs|fri|satur|sun)day|over the weekend)\b", re.I), 7),
    (re.compile(r"\bnext week(?:end)?\b", re.I), 14),
    (re.compile(r"\b(this month|next month)\b", re.I), 31),
    (re.compile(r"\b(currently|at the moment|right now|for now|for the time being|temporarily|these days|for the moment)\b", re.I), 60),
]
# Something that happens on a day: with a date that has passed, the line is over.
EVENT = re.compile(
    r"\b(appointment|appt|flight|flying|party|booked|booking|arriv\w*|deliver\w*|due|deadline|meeting|haircut|trip|visit\w*|"
    r"interview|away|until|till|conference|concert|gig|lunch|service|check-?up|reservation|match|wedding|launch|"
    r"on call|ticket\w*|checkout|check-?in)\b",
    re.I,
)
# A life event or a standing fact: dated, yet true for good.
LIFE_EVENT = re.compile(
    r"\b(born|birthday|anniversary|married|graduated|since|moved into|licen[cs]e|stayed|ran the|met|finished|founded|built|bought)\b",
    re.I,
)
DURABLE = re.compile(LIFE_EVENT.pattern[:-3] + r"|every|each|annual|yearly)\b", re.I)
# "until Friday": the weekday a line names with until.
UNTIL_DAY = re.compile(r"\buntil (mon|tues|wednes|thurs|fri|satur|sun)day\b", re.I)
WEEKDAYS = ["mon", "tues", "wednes", "thurs", "fri", "satur", "sun"]


def transient_days(text: str) -> int | None:
    """How many days after it was written a line saying this is still true; None for no word of transient state."""
    found = [days for pattern, days in TRANSIENT if pattern.search(text)]
    return min(found) if found else None
