"""This project's own episodic sets, for what LoCoMo does not ask, generated from seeds.

- ``updates``: knowledge updates. A person's facts change over months (the gym, the locker
  code, the manager, the car...), each value said in a different conversation, in tars's session
  logs (front matter, dated, one line per turn: a transcript, or a summary's points), among
  conversations about other things. The question asks for the fact now: the newest value's line
  must be in context, and ahead of every older value's line (or dated against it: every recalled
  note carries its date).
- ``journals``: dated daily notes (journal/YYYY-MM-DD.md, ordinary notes, as Obsidian's daily
  notes plugin writes them), a few bullets a day; things done now and then (the bike serviced,
  a haircut, the boiler checked...), plans for them on other days. "When did I last service the
  bike?": the line of the last time it was done must be in context, with its note's date.

Each seed is one person's vault. Tuning seeds and held-out seeds are fixed here, before any
figure was looked at; only the tuning seeds' figures were looked at while choosing anything.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from episodic_sets import EpisodicSet, Question

TUNING_SEEDS = (0, 1, 2, 3, 4)
HELD_OUT_SEEDS = (100, 101, 102, 103, 104)
START = datetime(2025, 9, 1, 9, 0)
NEWEST_TARGET = 0.90

# (topic, values over time, how each value is said, the questions asking for it now)
FACTS = [
    (
        "gym",
        ["Anytime Fitness on Mill Road", "the YMCA on Elm Street", "CrossFit Forge by the station"],
        [
            "I signed up at {v} this week.",
            "I switched gyms, I'm going to {v} now.",
            "Cancelled the old membership; {v} is my gym these days.",
        ],
        ["Which gym do I go to?", "where do I work out these days?"],
    ),
    (
        "locker",
        ["4471", "0932", "7718"],
        [
            "My locker code at work is {v}, remind me if I forget.",
            "They reset the lockers, my new code is {v}.",
            "Locker combination changed again: {v}.",
        ],
        ["What is my locker code?", "what's the combination for my work locker"],
    ),
    (
        "manager",
        ["Priya Raman", "Tom Becker", "Alicia Moreno"],
        ["My manager is {v}, we have one-to-ones on Mondays.", "Reorg today: I now report to {v}.", "New boss starting this week, {v}."],
        ["Who is my manager?", "who do I report to at work"],
    ),
    (
        "car",
        ["a grey 2014 Golf", "a blue Skoda Octavia estate", "a second-hand Nissan Leaf"],
        ["I drive {v}.", "Sold the old car and bought {v}.", "We traded in and picked up {v} yesterday."],
        ["What car do I drive?", "which car do I have now"],
    ),
    (
        "phone plan",
        ["Vodafone, 20 GB a month", "Giffgaff, 35 GB for ten pounds", "Three, unlimited data"],
        ["My phone plan is {v}.", "Moved my phone contract to {v}.", "Switched mobile provider again, now on {v}."],
        ["What is my mobile phone plan?", "which provider is my phone contract with"],
    ),
    (
        "dentist",
        ["Dr Okafor at Smile Studio", "Dr Lindqvist on Chapel Street", "the NHS practice at Hillside"],
        ["My dentist is {v}.", "I registered with a new dentist, {v}.", "Changed dentists: it's {v} now."],
        ["Who is my dentist?", "which dental practice am I with"],
    ),
    (
        "wifi",
        ["BlueFalcon-5G, password tangerine42", "Heron-Home, password marmalade77", "Otter-Net, password pebbles-19"],
        ["Home wifi is {v}.", "New router installed: the wifi is {v}.", "Reset the router, wifi is {v} now."],
        ["What is the home wifi password?", "what's our wifi called and its password"],
    ),
    (
        "coffee",
        ["a flat white with oat milk", "a double espresso", "a cortado, no sugar"],
        ["My usual coffee order is {v}.", "I've gone off milk, my order is {v} now.", "These days I always ask for {v}."],
        ["What is my usual coffee order?", "how do I take my coffee"],
    ),
    (
        "running",
        ["Saturday mornings at 7 with the parkrun group", "Tuesday and Thursday evenings along the canal", "Sunday long runs with Jess"],
        ["I run {v}.", "Changed my running routine: {v}.", "New plan for running, {v}."],
        ["When do I go running?", "what's my running routine"],
    ),
    (
        "address",
        ["14 Wren Close, Cambridge", "Flat 3, 88 Ferry Lane, Norwich", "2 Orchard Cottages, Ely"],
        ["My address is {v}.", "We moved! New address: {v}.", "Moving day done, we live at {v} now."],
        ["What is my home address?", "where do I live now"],
    ),
]

OTHER_TALK = [
    ("you", "Can you help me plan meals for the week? Something with lentils."),
    ("tars", "Sure: lentil dal on Monday, a lentil and squash soup on Wednesday, and a shepherd's pie with lentils on Friday."),
    ("you", "What was the name of that film with the lighthouse we talked about?"),
    ("tars", "You mentioned The Lighthouse from 2019, with Robert Pattinson and Willem Dafoe."),
    ("you", "Remind me to water the tomatoes tonight."),
    ("tars", "Noted: water the tomatoes this evening."),
    ("you", "I'm reading a book about the history of maps, it's slow going."),
    ("tars", "Which part are you on? The early portolan charts are usually the hardest going."),
    ("you", "My sister is visiting next month, any ideas for a day out?"),
    ("tars", "A walk along the river and lunch in the market, or the botanic garden if the weather holds."),
    ("you", "The kitchen tap is dripping again."),
    ("tars", "It may be the washer; they are cheap to replace with a spanner and the water turned off."),
    ("you", "I need a birthday present for my dad, he likes gardening."),
    ("tars", "A good pair of secateurs or a kneeling pad tend to go down well."),
    ("you", "How long should I boil an egg for a runny yolk?"),
    ("tars", "About six minutes from boiling water, then into cold water."),
    ("you", "Work was exhausting today, back to back meetings."),
    ("tars", "That sounds draining. Maybe block an hour tomorrow with no meetings?"),
    ("you", "What's a good stretch for a stiff lower back?"),
    ("tars", "Knees to chest, and the cat-cow stretch, a few slow rounds each."),
    ("you", "I want to learn some Spanish before the trip."),
    ("tars", "Ten minutes a day with an app and a phrasebook for the basics would be a good start."),
    ("you", "The cat knocked a glass off the table again."),
    ("tars", "Maybe keep glasses away from the edge, or a heavier tumbler for now."),
]

SUMMARY_OTHER = [
    "Planned a weekend trip to the coast; the user wants to leave early on Saturday.",
    "Talked through a budget spreadsheet; savings goal is to be reviewed next month.",
    "The user is learning to make sourdough and asked about hydration.",
    "Discussed a noisy neighbour; the user will speak to the landlord.",
    "Helped draft an email to the council about bin collection.",
    "The user is thinking about a new bike for commuting.",
    "Went over a reading list for the winter.",
    "The user's back has been sore; suggested stretches and a standing desk.",
]


def _log(started: datetime, said: list[tuple[str, str]], summary: list[str] | None, number: int) -> tuple[str, str, list[str]]:
    """(path, text, the lines as written): a session log as tars writes one, by its own writer."""
    from tarsd.chat.assistant import said_line, session_log_stem, session_log_text, transcript_title

    ended = started + timedelta(minutes=12)
    if summary is not None:
        title = summary[0]
        bullets = [f"- {point}" for point in summary[1:]]
    else:
        title = transcript_title(said[0][1])
        bullets = [said_line(who, text) for who, text in said]
    text = session_log_text(f"cli-{number}", started, ended, len(bullets), title, bullets)
    return f"sessions/{session_log_stem(started, title)}.md", text, bullets


def _line_of(text: str, bullet: str) -> int:
    return text.split("\n").index(bullet) + 1


def updates_set(seed: int) -> EpisodicSet:
    rng = random.Random(seed)
    facts = rng.sample(FACTS, 8)
    events: list[tuple[datetime, str, int]] = []  # (when, fact topic, value index)
    for topic, values, _, _ in facts:
        times = sorted(START + timedelta(days=rng.randrange(0, 200), hours=rng.randrange(0, 10)) for _ in values)
        events += [(when, topic, index) for index, when in enumerate(times[: rng.choice((2, 3))])]
    for _ in range(24):  # conversations about other things, between and around
        events.append((START + timedelta(days=rng.randrange(0, 210), hours=rng.randrange(0, 10)), "", 0))
    events.sort()
    notes: dict[str, str] = {}
    said_where: dict[tuple[str, int], tuple[str, int]] = {}
    by_topic = {f[0]: f for f in facts}
    for number, (when, topic, index) in enumerate(events):
        other = rng.sample(range(0, len(OTHER_TALK), 2), 2)
        chat = [turn for pair in other for turn in OTHER_TALK[pair : pair + 2]]
        if not topic:
            if rng.random() < 0.4:
                summary = ["Everyday things", *rng.sample(SUMMARY_OTHER, 3)]
                path, text, _ = _log(when, [], summary, number)
            else:
                path, text, _ = _log(when, chat, None, number)
            notes[path] = text
            continue
        _, values, sayings, _ = by_topic[topic]
        statement = sayings[index].format(v=values[index])
        if rng.random() < 0.35:  # a summary's point, as the model would write it
            point = f"The user said: {statement}"
            summary = [f"Catching up: {topic}", rng.choice(SUMMARY_OTHER), point, rng.choice(SUMMARY_OTHER)]
            path, text, bullets = _log(when, [], summary, number)
            line = _line_of(text, f"- {point}")
        else:
            turns = [chat[0], chat[1], ("you", statement), ("tars", "Got it, thanks for telling me."), chat[2], chat[3]]
            path, text, bullets = _log(when, turns, None, number)
            line = _line_of(text, bullets[2])
        notes[path] = text
        said_where[(topic, index)] = (path, line)
    questions = []
    for topic, _, _, asks in facts:
        said = sorted(index for (t, index) in said_where if t == topic)
        newest = said_where[(topic, said[-1])]
        stale = [said_where[(topic, index)] for index in said[:-1]]
        questions.append(Question(f"u{seed}-{topic}", rng.choice(asks), "update", [newest], newest=newest, stale=stale))
    split = "dev" if seed in TUNING_SEEDS else "held-out"
    return EpisodicSet(f"updates-{seed}", split, notes, questions)


# (thing done now and then, how a day's note says it was done, how it says one is planned, the question)
CHORES = [
    (
        "bike",
        [
            "Serviced the bike: new chain and brake pads.",
            "Took the bike in for its service at Velo Works.",
            "Bike service done, gears indexed.",
        ],
        ["Must book the bike in for a service soon.", "The bike's gears are slipping, service due."],
        ["When did I last service the bike?", "when was the bike last serviced"],
    ),
    (
        "haircut",
        ["Haircut at Ray's.", "Got my hair cut, shorter than usual.", "Haircut, finally."],
        ["Need a haircut.", "Hair getting long, book a cut."],
        ["When did I last get a haircut?", "when was my last haircut"],
    ),
    (
        "boiler",
        ["Boiler serviced by the gas engineer, all fine.", "Annual boiler check done.", "Engineer came for the boiler service."],
        ["Boiler service reminder came in the post.", "Call about the boiler service."],
        ["When was the boiler last serviced?", "when did the boiler get checked"],
    ),
    (
        "vet",
        ["Took Pepper to the vet for her jabs.", "Vet visit: Pepper's booster and a nail trim.", "Pepper at the vet, weight fine."],
        ["Pepper's vaccinations are due next month.", "Book Pepper's vet check."],
        ["When did Pepper last go to the vet?", "when was the cat's last vet visit"],
    ),
    (
        "tyres",
        ["New front tyres on the car.", "Rotated the car tyres and checked pressures.", "Tyre change at the garage."],
        ["Front tyres look worn.", "Ask the garage about tyres."],
        ["When did I last have the car tyres done?", "when were the tyres last changed"],
    ),
    (
        "gutters",
        ["Cleaned out the gutters, full of leaves.", "Gutters cleared.", "Up the ladder clearing the gutters all morning."],
        ["Gutters overflowing again in the rain.", "Gutters need doing."],
        ["When did I last clean the gutters?", "when were the gutters cleared"],
    ),
    (
        "dentist",
        ["Dentist check-up, no fillings.", "Dental hygienist appointment.", "Saw the dentist, one small filling."],
        ["Dentist sent a reminder for a check-up.", "Book the dentist."],
        ["When did I last see the dentist?", "when was my last dental check-up"],
    ),
    (
        "plants",
        ["Repotted the monstera and the fern.", "Repotting day: the monstera finally has a bigger pot.", "Repotted the spider plants."],
        ["The monstera is root bound.", "Buy compost for repotting."],
        ["When did I last repot the plants?", "when did I repot the monstera"],
    ),
]

DAILY = [
    "Groceries and a long walk.",
    "Worked from home, quiet day.",
    "Call with Mum in the evening.",
    "Finished the book about maps.",
    "Cooked the lentil dal again.",
    "Rain all day, stayed in.",
    "Lunch with Sam in town.",
    "Swim at the leisure centre.",
    "Tidied the shed.",
    "Paid the council tax.",
    "Watched the football.",
    "Early night, tired.",
    "Baked bread, crust too dark.",
    "Meeting ran over, missed the gym.",
]


def journals_set(seed: int) -> EpisodicSet:
    rng = random.Random(seed)
    chores = rng.sample(CHORES, 6)
    days: dict[datetime, list[str]] = {}
    last: dict[str, datetime] = {}
    for _ in range(150):  # a daily note on 150 of about 300 days
        days.setdefault(START + timedelta(days=rng.randrange(0, 300)), [])
    dates = sorted(days)
    for topic, done, planned, _ in chores:
        for when in sorted(rng.sample(dates, rng.choice((2, 3, 4)))):
            days[when].append(rng.choice(done))
            last[topic] = when
        for when in rng.sample(dates, 2):
            days[when].append(rng.choice(planned))
    notes: dict[str, str] = {}
    where: dict[tuple[datetime, str], int] = {}
    for when in dates:
        items = days[when] + rng.sample(DAILY, rng.choice((1, 2, 3)))
        rng.shuffle(items)
        body = [f"# {when:%A %d %B %Y}", "", *(f"- {item}" for item in items), ""]
        notes[f"journal/{when:%Y-%m-%d}.md"] = "\n".join(body)
        for offset, item in enumerate(items):
            where[(when, item)] = 3 + offset
    questions = []
    for topic, done, _, asks in chores:
        when = last[topic]
        item = next(i for i in days[when] if i in done)
        line = (f"journal/{when:%Y-%m-%d}.md", where[(when, item)])
        older = [(f"journal/{d:%Y-%m-%d}.md", where[(d, i)]) for d in dates if d < when for i in days[d] if i in done and (d, i) in where]
        questions.append(Question(f"j{seed}-{topic}", rng.choice(asks), "last time", [line], newest=line, stale=older))
    split = "dev" if seed in TUNING_SEEDS else "held-out"
    return EpisodicSet(f"journals-{seed}", split, notes, questions)


def own_sets(name: str) -> list[EpisodicSet]:
    make = {"updates": updates_set, "journals": journals_set}[name]
    return [make(seed) for seed in (*TUNING_SEEDS, *HELD_OUT_SEEDS)]


def check_own(name: str, rows: list[dict]) -> list[str]:
    """Knowledge updates and journals: the newest in context >= NEWEST_TARGET, on each split, hybrid and chat."""
    from common import met

    misses = []
    print(f"\n{name} targets (newest in context >= {NEWEST_TARGET}, ahead of or dated against the older):")
    for split in ("dev", "held-out"):
        for key in ("hybrid", "chat"):
            group = [r[key] for r in rows if r["split"] == split and key in r]
            if not group:
                continue
            newest = sum(g["newest"] for g in group) / len(group)
            placed = sum(g["newest"] and (g["ahead"] or g["dated"]) for g in group) / len(group)
            ok = newest >= NEWEST_TARGET and placed >= NEWEST_TARGET
            print(f"  {split:8} {key:6} newest in {newest:.3f}  and ahead or dated {placed:.3f}  {met(ok)}")
            if not ok:
                misses.append(f"{name} {split} {key}: newest in {newest:.3f}, ahead or dated {placed:.3f}")
    return misses
