"""What the memory-history generator (tests/harness/memory_histories.py) says and how: the pools of
values (names, cities, employers, drinks...), the noise one fact is written with (case, a typo,
units, times, dates, phone numbers), the slots a line is about with their phrasings, the durable
one-off facts, the passing states, and the phrasings held out (never seen while the review's
checks were tuned)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta

NAMES = (
    "Anna Ben Carla Dara Eoin Fiona Gus Hana Ivan Jane Kofi Lena Mick Nora Oisin Priya Quinn Rosa Sean Tara Uma Victor "
    "Wanda Xavier Yusuf Zoe Aoife Bruno Ciara Dmitri Elif Farah Greta Hugo Ines Jonas Keiko Liam Maeve Nils Olga Pablo "
    "Rhea Stefan Tomas Ursula Vera Wim Yara Zeno Agnes Basil Cora Dermot Edith Felix Gemma Harvey Iris Jasper Kira "
    "Lorcan Mona Niamh Otto Petra Ronan Saoirse Tadhg Ulla Vivek Wren Yvonne Zara Alma Boris Cillian Delia Emeka Freya "
    "Gideon Hilde Imogen Joaquin Kasia Leon Malik Noor Orla Piet Rafael Sunita Theo Una Valentin Willa Amir Bea Cosmo "
    "Dolores Ezra Fintan Grainne Hamid Isolde Jude Kamala Lionel Marta Nuala Oscar Pia"
).split()
RELATIONS = "sister brother mother father cousin neighbour colleague aunt uncle friend flatmate godmother mentor".split()
CITIES = (
    "Dublin Cork Galway Limerick Berlin Munich Hamburg Lisbon Porto Madrid Seville Paris Lyon Amsterdam Utrecht Oslo "
    "Bergen Vienna Prague Krakow Leeds Bristol Glasgow Edinburgh Boston Denver Toronto Montreal Sydney Perth Kyoto Osaka"
).split()
COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Hooli",
    "Vandelay Industries",
    "Stark Solar",
    "Wayne Freight",
    "Soylent",
    "Aperture",
    "Tyrell",
    "Wonka Foods",
    "Oceanic",
    "Pied Piper",
    "Massive Dynamic",
    "Nakatomi",
    "Cyberdyne",
    "Monarch Paper",
    "Gekko & Co",
]
ROLES = (
    "designer|data engineer|nurse|teacher|product manager|accountant|architect|paramedic|chef|lawyer|pharmacist|electrician|"
    "translator|physiotherapist|journalist|developer|team lead|researcher"
).split("|")
DRINKS = "green tea|flat white|espresso|oat latte|hot chocolate|sparkling water|mint tea|cortado|rooibos|black coffee".split("|")
ALLERGENS = "peanuts|shellfish|gluten|lactose|sesame|kiwi|eggs|soy|mustard|celery|penicillin|cats".split("|")
PETS = "Perry Luna Biscuit Pixel Mango Olive Ziggy Pepper Nacho Juniper Waffles Comet".split()
PHONES = "Pixel 7|Pixel 8|iPhone 13|iPhone 15|Fairphone 5|Galaxy S23|Nothing Phone 2".split("|")
LAPTOPS = "ThinkPad X1|MacBook Air M2|Framework 13|Dell XPS 13|ThinkPad T14".split("|")
DOCTORS = "Byrne Kelly Murphy Walsh Novak Silva Moreau Lindqvist Tanaka Okafor Rossi Brennan".split()
TEAMS = "Payments|Search|Growth|Platform|Mobile|Data|Billing|Onboarding".split("|")
DIETS = "vegetarian|vegan|pescatarian|flexitarian".split("|")
BOOKS = "Dune|Middlemarch|The Overstory|Piranesi|Klara and the Sun|Stoner|The Dispossessed|Circe".split("|")
RACES = "Dublin marathon|Berlin half marathon|Cork 10k|Lisbon half|park run series".split("|")
SHOPS = "Amazon|IKEA|the bike shop|Zalando|the pharmacy".split("|")
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()

# Categories for durable one-off facts: "Favourite band: X". Each is its own slot, so none is an update of another.
FAVOURITES = {
    "band": "Radiohead|Fontaines D.C.|Wet Leg|Beach House|Khruangbin|The National|Bicep|Lankum".split("|"),
    "film": "Paddington 2|Arrival|Spirited Away|In Bruges|Heat|Amelie|The Apartment".split("|"),
    "cheese": "Gubbeen|comte|manchego|Durrus|gouda|halloumi".split("|"),
    "board game": "Wingspan|Catan|Azul|Codenames|Carcassonne|Ticket to Ride".split("|"),
    "podcast": "Radiolab|The Rest Is History|99% Invisible|Reply All|Desert Island Discs".split("|"),
    "season": "autumn|spring|winter|summer".split("|"),
    "pizza topping": "mushroom|pepperoni|olives|nduja|anchovies|pineapple".split("|"),
    "beer": "Guinness|a Czech pilsner|a sour|IPA|stout".split("|"),
    "walk": "Howth cliff path|the canal loop|Killiney hill|the river path|Bray to Greystones".split("|"),
    "author": "Ursula Le Guin|Sally Rooney|Kazuo Ishiguro|Terry Pratchett|Toni Morrison".split("|"),
    "colour": "green|navy|mustard yellow|teal|burgundy".split("|"),
    "sandwich": "BLT|falafel wrap|toastie|banh mi|reuben".split("|"),
    "ice cream": "pistachio|salted caramel|mint choc chip|vanilla".split("|"),
}
INSTRUMENTS = "guitar|piano|cello|fiddle|ukulele|drums|bass|tin whistle".split("|")
APPS = [("Todoist", "tasks"), ("Obsidian", "notes"), ("YNAB", "the budget"), ("Strava", "runs"), ("Anki", "flashcards")]
APPS += [("Bitwarden", "passwords"), ("Komoot", "hikes"), ("Duolingo", "languages"), ("Letterboxd", "films"), ("Splitwise", "shared bills")]


# ---- noise: the ways one fact is written differently ----


def _typo(rng: random.Random, text: str) -> str:
    """One typo in a lower-case word of 5 letters or more (names, numbers and units stay)."""
    words = [(m.start(), m.group()) for m in re.finditer(r"\b[a-z]{5,}\b", text)]
    if not words:
        return text
    start, word = rng.choice(words)
    i = rng.randrange(1, len(word) - 1)
    kind = rng.choice(("drop", "double", "swap"))
    if kind == "drop":
        bad = word[:i] + word[i + 1 :]
    elif kind == "double":
        bad = word[:i] + word[i] + word[i:]
    else:
        bad = word[: i - 1] + word[i] + word[i - 1] + word[i + 1 :]
    return text[:start] + bad + text[start + len(word) :]


def _surface(rng: random.Random, text: str, typo_rate: float) -> str:
    """Case, a full stop, and now and then a typo."""
    roll = rng.random()
    if roll < 0.08:
        text = text.lower()
    elif roll < 0.12 and text[:1].islower():
        text = text[:1].upper() + text[1:]
    if rng.random() < 0.15 and not text.endswith((".", ")", ":")):
        text += "."
    if rng.random() < typo_rate:
        text = _typo(rng, text)
    return text


def _number(rng: random.Random, n: int) -> str:
    words = "zero one two three four five six seven eight nine ten eleven twelve".split()
    return words[n] if n < len(words) and rng.random() < 0.3 else str(n)


def _km(rng: random.Random, n: int) -> str:
    return rng.choice([f"{n} km", f"{n}km", f"{n} kilometres", f"{n} kilometers", f"{n}k"])


def _kg(rng: random.Random, n: int) -> str:
    return rng.choice([f"{n} kg", f"{n}kg", f"{n} kilos", f"{n} kilograms"])


def _clock(rng: random.Random, hour: int, minute: int) -> str:
    twelve = hour % 12 or 12
    half = "am" if hour < 12 else "pm"
    return rng.choice(
        [f"{hour}:{minute:02d}", f"{hour:02d}:{minute:02d}", f"{twelve}.{minute:02d}{half}", f"{twelve}:{minute:02d} {half}"]
        + ([f"{twelve}{half}", f"{twelve} {half}"] if minute == 0 else [])
    )


def _day(rng: random.Random, when: date, year: bool = False) -> str:
    month = MONTHS[when.month - 1]
    suffix = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}.get(when.day, "th")
    forms = [f"{when.day} {month}", f"{month} {when.day}", f"{when.day}{suffix} {month}", f"{month[:3]} {when.day}"]
    if year:
        return rng.choice([f"{form} {when.year}" for form in forms[:2]] + [when.isoformat()])
    return rng.choice(forms + [when.isoformat()])


def _phone_number(rng: random.Random) -> tuple[str, ...]:
    """Digits of a phone number; written in groups one way or another (_phone)."""
    return ("08" + str(rng.randint(3, 9)), f"{rng.randint(100, 999)}", f"{rng.randint(1000, 9999)}")


def _phone(rng: random.Random, groups: tuple[str, ...]) -> str:
    return rng.choice([" ".join(groups), "-".join(groups), "".join(groups), f"{groups[0]} {groups[1]}{groups[2]}"])


# ---- slots: what a line is about, and how it is said ----


@dataclass
class Slot:
    """Something that holds one value at a time: the user's city, Anna's employer, the gym locker."""

    key: str
    section: str
    say: list[str]  # phrasings of a value: {who} the person, {v} the value
    change: list[str]  # phrasings used when the value has just changed ("Moved to {v}")
    values: list  # the values it can take, or a function of rng giving one
    who: list[str] = field(default_factory=lambda: [""])
    changes: bool = True
    render: object = None  # value -> text (a unit, a clock time), noise of its own

    def value(self, rng: random.Random, before=()):
        """A value, none of those it had ``before`` (a change never goes back to an old value)."""
        pool = [v for v in self.values if v not in before] if isinstance(self.values, list) else None
        if pool is None:
            new = self.values(rng)
            while new in before:
                new = self.values(rng)
            return new
        return rng.choice(pool or self.values)

    def text(self, rng: random.Random, value, changed: bool) -> str:
        template = rng.choice(self.change if changed and self.change and rng.random() < 0.7 else self.say)
        shown = self.render(rng, value) if self.render is not None else str(value)
        text = template.replace("{who}", rng.choice(self.who)).replace("{v}", shown)
        return text[:1].upper() + text[1:]


def _person_slots(rng: random.Random, name: str, relation: str) -> list[Slot]:
    who = [name, f"{relation} {name}", f"my {relation} {name}", f"{name} ({relation})"]
    own = [f"{name}'s"] * 2 + [f"my {relation} {name}'s"]
    slots = [
        Slot(
            f"{name}:city",
            "People",
            ["{who} lives in {v}", "{who} is based in {v}", "{who} lives in {v} now", "{who}: lives in {v}"]
            + [f"{o} home is in {{v}}" for o in own[:1]],
            ["{who} moved to {v}", "{who} has moved to {v}", "{who} relocated to {v}"],
            CITIES,
            who,
        ),
        Slot(
            f"{name}:employer",
            "People",
            ["{who} works at {v}", "{who} works for {v}", "{who}: job at {v}", "{who} is employed by {v}"],
            ["{who} joined {v}", "{who} started at {v}", "{who} now works at {v}", "{who} switched jobs to {v}"],
            COMPANIES,
            who,
        ),
        Slot(
            f"{name}:role",
            "People",
            ["{who} is a {v}", "{who} works as a {v}", "{who}: {v} by trade"],
            ["{who} became a {v}", "{who} is now a {v}", "{who} retrained as a {v}"],
            ROLES,
            who,
        ),
        Slot(
            f"{name}:birthday",
            "People",
            [f"{name}'s birthday is {{v}}", f"{name} was born on {{v}}", f"Birthday of {name}: {{v}}", f"{name}: birthday {{v}}"],
            [],
            lambda r: date(2001, r.randint(1, 12), r.randint(1, 28)),
            changes=False,
            render=lambda r, v: _day(r, v),
        ),
        Slot(
            f"{name}:kids",
            "People",
            ["{who} has {v} kids", "{who} has {v} children", "{who} is a parent of {v}"],
            ["{who} now has {v} kids", "{who} had a baby, {v} kids now"],
            lambda r: r.randint(1, 4),
            who,
            render=_number,
        ),
        Slot(
            f"{name}:drink",
            "People",
            ["{who} drinks {v}", "{who}'s usual drink is {v}", "{who} always orders {v}"],
            [],
            DRINKS,
            who,
            changes=False,
        ),
        Slot(
            f"{name}:allergy",
            "People",
            ["{who} is allergic to {v}", "{who} has a {v} allergy", "{who} can't have {v}"],
            [],
            ALLERGENS,
            who,
            changes=False,
        ),
        Slot(
            f"{name}:phone",
            "People",
            [f"{o} number is {{v}}" for o in own] + [f"Phone number of {name}: {{v}}"],
            [f"{name} has a new number: {{v}}", f"{name}'s new number is {{v}}"],
            _phone_number,
            render=_phone,
        ),
    ]
    return slots


def _own_slots() -> list[Slot]:
    """Facts about the user, each under the section a person would put it."""
    doctor = lambda r, v: v  # noqa: E731 - the value is shown as it is
    return [
        Slot(
            "me:city",
            "Core",
            ["Lives in {v}", "I live in {v}", "Home: {v}", "Based in {v}", "Home city is {v}"],
            ["Moved to {v}", "Now living in {v}", "Relocated to {v}"],
            CITIES,
        ),
        Slot(
            "me:employer",
            "Core",
            ["Works at {v}", "I work at {v}", "Employer: {v}", "Working for {v}"],
            ["Started a new job at {v}", "Joined {v}", "Now works at {v}"],
            COMPANIES,
        ),
        Slot("me:role", "Core", ["Works as a {v}", "Job title: {v}", "I'm a {v}", "Role: {v}"], ["Promoted to {v}", "Now a {v}"], ROLES),
        Slot(
            "me:manager",
            "Work",
            ["Manager is {v}", "My manager: {v}", "Reports to {v}", "Boss: {v}"],
            ["New manager: {v}", "Now reports to {v}"],
            NAMES,
        ),
        Slot(
            "me:team",
            "Work",
            ["On the {v} team", "Team: {v}", "Works in the {v} team"],
            ["Moved to the {v} team", "Joined the {v} team"],
            TEAMS,
        ),
        Slot(
            "me:standup",
            "Work",
            ["Standup at {v}", "Daily standup is at {v}", "Team standup: {v} every morning"],
            ["Standup moved to {v}", "Standup is now at {v}"],
            lambda r: (r.choice((9, 9, 10, 10, 11)), r.choice((0, 15, 30, 45))),
            render=lambda r, v: _clock(r, *v),
        ),
        Slot(
            "me:desk",
            "Work",
            ["Desk number {v}", "Sits at desk {v}", "Desk: {v}"],
            ["New desk: {v}", "Moved to desk {v}"],
            lambda r: r.randint(2, 240),
        ),
        Slot(
            "me:laptop",
            "Work",
            ["Laptop: {v}", "Work laptop is a {v}", "Uses a {v} for work"],
            ["New laptop: {v}", "Got a {v} for work"],
            LAPTOPS,
        ),
        Slot(
            "me:gp",
            "Health",
            ["GP is Dr {v}", "Doctor: Dr {v}", "My GP: Dr {v}"],
            ["New GP: Dr {v}", "Switched GP to Dr {v}"],
            DOCTORS,
            render=doctor,
        ),
        Slot(
            "me:dentist",
            "Health",
            ["Dentist is Dr {v}", "Dentist: Dr {v}", "Goes to Dr {v} for teeth"],
            ["New dentist: Dr {v}", "Changed dentist to Dr {v}"],
            DOCTORS,
        ),
        Slot(
            "me:weight",
            "Health",
            ["Weighs {v}", "Weight: {v}", "Body weight {v}"],
            ["Weight now {v}", "Down to {v}", "Weighs {v} now"],
            lambda r: r.randint(58, 95),
            render=_kg,
        ),
        Slot(
            "me:running",
            "Health",
            ["Runs {v} a week", "Weekly running: {v}", "Running {v} per week"],
            ["Now running {v} a week", "Up to {v} a week of running"],
            lambda r: r.randint(8, 60),
            render=_km,
        ),
        Slot(
            "me:locker",
            "Health",
            ["Gym locker is {v}", "Locker number {v} at the gym", "Gym locker: {v}", "Uses locker {v} at the gym"],
            ["New gym locker: {v}", "Gym locker changed to {v}"],
            lambda r: r.randint(1, 199),
        ),
        Slot("me:blood", "Health", ["Blood type {v}", "Blood group: {v}"], [], ["A+", "O-", "B+", "AB+"], changes=False),
        Slot(
            "me:rent",
            "Home",
            ["Rent is €{v} a month", "Pays €{v} rent a month", "Monthly rent: €{v}"],
            ["Rent went up to €{v}", "New rent: €{v} a month"],
            lambda r: r.randrange(900, 2600, 25),
        ),
        Slot(
            "me:bins",
            "Home",
            ["Bins go out on {v}", "Bin day is {v}", "Bin collection: {v}"],
            ["Bin day changed to {v}", "Bins now go out on {v}"],
            WEEKDAYS,
        ),
        Slot("me:phone", "Tech", ["Phone: {v}", "Uses a {v}", "My phone is a {v}"], ["New phone: {v}", "Upgraded to a {v}"], PHONES),
        Slot(
            "me:coffee",
            "Food",
            ["Coffee order: {v}", "Usual coffee is a {v}", "Drinks {v} in the morning"],
            ["Switched to {v}", "Now drinks {v} in the morning"],
            DRINKS,
        ),
        Slot("me:diet", "Food", ["Diet: {v}", "Is {v}", "Eats a {v} diet"], ["Went {v}", "Now {v}"], DIETS),
        Slot(
            "me:bookclub",
            "Hobbies",
            ["Book club meets on {v}", "Book club: {v} evenings", "Book club is on {v}"],
            ["Book club moved to {v}"],
            WEEKDAYS,
        ),
        Slot("me:seat", "Travel", ["Prefers {v} seats", "Likes the {v} seat on flights"], ["Now prefers {v} seats"], ["aisle", "window"]),
        Slot("me:partner", "Core", ["Partner: {v}", "My partner is {v}", "Lives with {v}"], [], NAMES, changes=False),
        Slot(
            "me:birthday",
            "Core",
            ["Birthday: {v}", "My birthday is {v}", "Born on {v}"],
            [],
            lambda r: date(1980 + r.randint(0, 20), r.randint(1, 12), r.randint(1, 28)),
            changes=False,
            render=lambda r, v: _day(r, v, year=r.random() < 0.5),
        ),
    ]


def _kid_slots(rng: random.Random, names: list[str]) -> list[Slot]:
    """The user's children: their ages go up on their birthdays."""
    return [
        Slot(
            f"kid:{name}:age",
            "Family",
            [f"{name} is {{v}}", f"{name} is {{v}} years old", f"{name}: age {{v}}", f"{name} ({{v}}) is my daughter"],
            [f"{name} turned {{v}}", f"{name} is {{v}} now"],
            lambda r: r.randint(3, 14),
            render=_number,
        )
        for name in names
    ]


def _one_off_facts(rng: random.Random, count: int, used: set[str], people: list[str]) -> list[tuple[str, str, str]]:
    """Durable facts of slots of their own: (slot, section, text)."""
    found: list[tuple[str, str, str]] = []
    makers = []
    for category, values in FAVOURITES.items():
        forms = [f"Favourite {category}: {{v}}", f"My favourite {category} is {{v}}", f"Loves {{v}} ({category})"]
        makers.append((f"fav:{category}", "Likes", lambda r, fs=forms, vs=values: r.choice(fs).replace("{v}", r.choice(vs))))
    for instrument in INSTRUMENTS:
        forms = [f"Plays the {instrument}", f"Learning the {instrument} since {{y}}", f"Has played {instrument} for {{n}} years"]
        makers.append(
            (
                f"plays:{instrument}",
                "Hobbies",
                lambda r, fs=forms: r.choice(fs).replace("{y}", str(r.randint(2005, 2024))).replace("{n}", str(r.randint(2, 20))),
            )
        )
    for app, purpose in APPS:
        forms = [f"Uses {app} for {purpose}", f"{purpose.capitalize()} live in {app}", f"Keeps {purpose} in {app}"]
        makers.append((f"app:{app}", "Tech", lambda r, fs=forms: r.choice(fs)))
    for index, name in enumerate(rng.sample(PETS, k=2)):  # two pets: a dog and a cat
        species = ("dog", "cat")[index]
        forms = [f"Has a {species} called {name}", f"{species.capitalize()}: {name}", f"Our {species} is named {name}"]
        makers.append((f"pet:{name}", "Family", lambda r, fs=forms: r.choice(fs)))
    for city in CITIES:
        forms = [f"Best coffee in {city}: {{p}}'s café", f"Stayed in {city} in {{y}}", f"Wants to visit {city} again"]
        makers.append(
            (
                f"likes:{city}",
                "Travel",
                lambda r, fs=forms: r.choice(fs).replace("{p}", r.choice(NAMES)).replace("{y}", str(r.randint(2010, 2025))),
            )
        )
    places = ["college", "the running club", "work", "school", "a wedding in Cork", "the book club", "a hostel in Lisbon", "the choir"]
    things = ["a good pen", "a board game", "a plant", "concert tickets", "a cookbook", "wool socks", "a puzzle", "a bread knife"]
    for name in people:
        met = [f"Met {name} at {{p}} in {{y}}", f"Knows {name} from {{p}}", f"{name}: met at {{p}}"]
        makers.append(
            (
                f"{name}:met",
                "People",
                lambda r, fs=met: r.choice(fs).replace("{p}", r.choice(places)).replace("{y}", str(r.randint(1998, 2024))),
            )
        )
        gift = [f"Gift idea for {name}: {{t}}", f"{name} would like {{t}}"]
        makers.append((f"{name}:gift", "People", lambda r, fs=gift: r.choice(fs).replace("{t}", r.choice(things))))
        hobby = [f"{name} plays the {{i}}", f"{name} is learning the {{i}}"]
        makers.append((f"{name}:hobby", "People", lambda r, fs=hobby: r.choice(fs).replace("{i}", r.choice(INSTRUMENTS))))
    makers += [
        (
            "bio:married",
            "Core",
            lambda r: r.choice(
                [
                    f"Married on {_day(r, date(r.randint(2008, 2020), r.randint(1, 12), r.randint(1, 28)), True)}",
                    f"Got married in {r.randint(2008, 2020)}",
                ]
            ),
        ),
        (
            "bio:graduated",
            "Core",
            lambda r: r.choice([f"Graduated in {r.randint(2000, 2015)}", f"Finished college in {r.randint(2000, 2015)}"]),
        ),
        ("bio:flat", "Home", lambda r: f"Moved into the flat in {r.choice(MONTHS)} {r.randint(2015, 2023)}"),
        ("bio:anniversary", "Family", lambda r: f"Anniversary: {_day(r, date(2000, r.randint(1, 12), r.randint(1, 28)))}"),
        ("bio:licence", "Travel", lambda r: f"Driving licence since {r.randint(2000, 2018)}"),
        ("bio:marathon", "Hobbies", lambda r: f"Ran the {r.choice(RACES)} in {r.randint(2015, 2024)}"),
    ]
    rng.shuffle(makers)
    for slot, section, make in makers:
        if len(found) >= count:
            break
        if slot not in used:
            used.add(slot)
            found.append((slot, section, make(rng)))
    return found


# ---- transient lines: true until a day ----


def _next_weekday(day: date, weekday: int) -> date:
    ahead = (weekday - day.weekday()) % 7
    return day + timedelta(days=ahead or 7)


def _transient(rng: random.Random, today: date) -> tuple[str, date]:
    """A line true only for a while, and its last day."""
    soon = today + timedelta(days=rng.randint(3, 40))
    city, person, doctor = rng.choice(CITIES), rng.choice(NAMES), rng.choice(DOCTORS)
    choices = [
        (rng.choice(["On call this week", "This week: on call for the platform team", "On call until Sunday"]), today + timedelta(days=7)),
        (rng.choice([f"Currently reading {rng.choice(BOOKS)}", f"Reading {rng.choice(BOOKS)} at the moment"]), today + timedelta(days=45)),
        (f"Working from the {city} office until Friday", _next_weekday(today, 4)),
        (rng.choice([f"Dentist appointment on {_day(rng, soon)}", f"Appointment with Dr {doctor} on {_day(rng, soon)}"]), soon),
        (f"Flight to {city} on {_day(rng, soon)}", soon),
        (f"{person}'s party is on {_day(rng, soon)}", soon),
        (f"Parcel from {rng.choice(SHOPS)} arriving {_day(rng, soon)}", soon),
        (f"Car service booked for {_day(rng, soon)}", soon),
        (f"Haircut on {_day(rng, soon)} at {_clock(rng, rng.randint(9, 17), 0)}", soon),
        (rng.choice([f"Visiting {person} this weekend", f"This weekend: {person} is staying over"]), today + timedelta(days=3)),
        (rng.choice(["Off work today", "Working late tonight", "Home sick today"]), today + timedelta(days=1)),
        (f"Away until {_day(rng, soon)}", soon),
        (rng.choice(["Temporarily using the spare laptop", "For now using the old phone"]), today + timedelta(days=30)),
        (f"Training for the {rng.choice(RACES)} at the moment", today + timedelta(days=60)),
        (f"Next week: conference in {city}", today + timedelta(days=14)),
    ]
    return rng.choice(choices)


# ---- phrasings held out: never seen while the review's checks were tuned ----

# Added to a slot's phrasings with ``generate(..., unseen_phrasings=True)``: the bench reports the
# held-out seeds with them too, to show what the checks make of wording they were not tuned on.
UNSEEN_SAY = {
    "city": ["{who} calls {v} home", "{who} has a flat in {v}", "{who}'s place is in {v}"],
    "employer": ["{who} is at {v}", "{who}'s company: {v}", "{who} has a job with {v}"],
    "role": ["{who}, a {v}", "{who} trained as a {v}"],
    "kids": ["{who}: {v} kids", "{who} has {v} little ones"],
    "drink": ["{who} orders {v}", "{who} likes {v}"],
    "allergy": ["No {v} for {who}", "{who} reacts badly to {v}"],
    "phone": ["Call {name} on {v}"],
    "me:city": ["Calls {v} home", "Has a flat in {v}"],
    "me:employer": ["Company: {v}", "Day job at {v}"],
    "me:manager": ["Line manager {v}"],
    "me:locker": ["Locker at the gym: {v}"],
    "me:running": ["Running about {v} each week"],
    "me:rent": ["The flat costs €{v} a month"],
    "me:coffee": ["Morning coffee: {v}"],
    "me:standup": ["Standup every day at {v}"],
}
UNSEEN_CHANGE = {
    "city": ["{who} now calls {v} home", "{who} left for {v}"],
    "employer": ["{who} took a job at {v}", "{who} went to {v}"],
    "role": ["{who} changed career to {v}"],
    "kids": ["{who}'s family grew to {v} kids"],
    "phone": ["{name} got a new number, {v}"],
    "me:city": ["Left for {v}"],
    "me:employer": ["Took a job at {v}"],
    "me:manager": ["{v} is my manager now"],
}
UNSEEN_TRANSIENT = [
    "Out of office until {date}",
    "Busy with the move this week",
    "Dinner with {person} on {date}",
    "Train to {city} on {date}",
    "Guests arriving {date}",
    "Paying the tax bill by {date}",
]


# A second set of held-out phrasings, written on 2026-11-27 before the checks were changed for issue 45's
# second round and never run (nor read against the checks' errors) until its final measurement: the
# UNSEEN_* set above had been looked at by then, so it no longer says how the checks do on wording
# nobody tuned them on. ``generate(..., unseen_phrasings="fresh")``.
FRESH_SAY = {
    "city": ["{who} is living in {v}", "{who} lives out in {v}", "Where {who} lives: {v}"],
    "employer": ["{who} is employed at {v}", "{who}'s employer is {v}", "{who} has been at {v} for a while"],
    "role": ["{who}'s job: {v}", "{who} is a qualified {v}"],
    "kids": ["{who} has got {v} kids", "Kids of {who}: {v}"],
    "drink": ["{who} takes {v}", "{who}'s go-to drink: {v}", "{who} prefers {v}"],
    "allergy": ["{who} must avoid {v}", "{who}: allergy to {v}", "Keep {v} away from {who}"],
    "phone": ["{name}'s mobile: {v}", "Mobile for {name}: {v}"],
    "me:city": ["Living in {v}", "My home is in {v}", "Current city: {v}"],
    "me:employer": ["Employed by {v}", "My employer is {v}", "Work: {v}"],
    "me:role": ["Job: {v}", "My job is {v}"],
    "me:manager": ["Reporting to {v}", "{v} is my boss"],
    "me:team": ["Part of the {v} team"],
    "me:desk": ["Desk {v}"],
    "me:locker": ["Locker {v} at the gym"],
    "me:running": ["About {v} of running a week"],
    "me:rent": ["Monthly rent is €{v}"],
    "me:coffee": ["Usually orders a {v}"],
    "me:standup": ["Standups are at {v}"],
    "me:bins": ["Bins: {v}"],
}
FRESH_CHANGE = {
    "city": ["{who} is in {v} now", "{who} moved over to {v}"],
    "employer": ["{who} got a job at {v}", "{who} moved jobs to {v}"],
    "role": ["{who} is a {v} now", "{who} qualified as a {v}"],
    "kids": ["{who} has {v} kids now"],
    "phone": ["{name} changed number to {v}", "Updated number for {name}: {v}"],
    "me:city": ["Moved house to {v}", "Living in {v} now"],
    "me:employer": ["Changed jobs, now at {v}", "Started working at {v}"],
    "me:manager": ["Manager changed to {v}", "Reporting to {v} now"],
    "me:locker": ["Gym locker is now {v}"],
    "me:rent": ["Rent increased to €{v}"],
}
FRESH_TRANSIENT = [
    "Back from leave on {date}",
    "Exam on {date}",
    "Plumber coming {date}",
    "{person} visiting from {city} until {date}",
    "Renewing the passport before {date}",
    "Travelling to {city} next week",
]


def _unseen(slot: Slot, say: dict[str, list[str]] = UNSEEN_SAY, change: dict[str, list[str]] = UNSEEN_CHANGE) -> None:
    """Give ``slot`` the held-out phrasings of its kind (UNSEEN_*, or the FRESH_* set)."""
    kind = slot.key if slot.key.startswith("me:") else slot.key.split(":", 1)[1]
    name = slot.key.split(":", 1)[0]
    slot.say = slot.say + [t.replace("{name}", name) for t in say.get(kind, [])]
    slot.change = slot.change + [t.replace("{name}", name) for t in change.get(kind, [])]
