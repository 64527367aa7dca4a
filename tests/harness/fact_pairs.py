"""A labelled set of fact pairs for memory dedup: (line already in memory, new fact, label).

Labels:
  restatement    the same fact said again: must be refused as a duplicate
  update         the same thing with another value (name, number, date, detail, tense)
  contradiction  negated, opposite words, or the same words in another order of a relation
  different      looks alike but is about something else (must not be a duplicate)
  unrelated      nothing in common

Only "restatement" may be a duplicate. Updates and contradictions should be offered as
possible updates; "different" pairs may be offered as one or added as new.
"""

from __future__ import annotations

PAIRS: list[tuple[str, str, str]] = [
    # ---- restatements ----
    ("My dog's name is Perry", "my dog is called Perry", "restatement"),
    ("Dog: Perry", "My dog's name is Perry", "restatement"),
    ("My dog is named Perry", "Perry is my dog's name", "restatement"),
    ("I live in Dublin", "Lives in Dublin", "restatement"),
    ("Favourite colour: green", "My favorite color is green", "restatement"),
    ("I'm allergic to peanuts", "I am allergic to peanuts.", "restatement"),
    ("Works at Google", "I work for Google", "restatement"),
    ("Has two kids", "I have 2 children", "restatement"),
    ("Never answer in British English", "Don't ever answer in British English", "restatement"),
    ("Always answer in British English", "always answer in british english!", "restatement"),
    ("My locker number is 14", "Locker number: 14", "restatement"),
    ("Birthday: 3 May", "My birthday is May 3rd", "restatement"),
    ("Prefers tea over coffee", "I prefer tea over coffee", "restatement"),
    ("My wife is called Anna", "Wife: Anna", "restatement"),
    ("I use Neovim as my editor", "My editor is Neovim", "restatement"),
    ("Sister: Maria, lives in Madrid", "My sister Maria lives in Madrid", "restatement"),
    ("Mom's birthday: June 12", "My mum's birthday is 12 June", "restatement"),
    ("I don't eat pork", "I do not eat pork", "restatement"),
    ("Allergic to penicillin", "I'm allergic to penicillin", "restatement"),
    ("My phone number is 555-0142", "Phone: 555-0142", "restatement"),
    ("Works as a nurse at St James's Hospital", "I work as a nurse at St James's Hospital", "restatement"),
    ("Speaks Spanish and French", "I speak French and Spanish", "restatement"),
    ("My partner Alex is vegetarian", "Alex (my partner) is a vegetarian", "restatement"),
    ("I run 5k every Saturday", "Runs 5k every Saturday", "restatement"),
    ("Prefers metric units", "I prefer metric units.", "restatement"),
    ("Wakes up at 6:30", "I wake up at 6:30", "restatement"),
    ("Doesn't drink alcohol", "I do not drink alcohol", "restatement"),
    ("My GP is Dr Byrne", "Dr Byrne is my GP", "restatement"),
    ("The wifi password is 'correct horse'", "Wifi password: 'correct horse'", "restatement"),
    ("I'm left-handed", "Left handed", "restatement"),
    ("Likes jazz", "I like jazz", "restatement"),
    ("Has a cat called Luna", "My cat's name is Luna", "restatement"),
    ("Anna is Ben's sister", "Ben's sister is Anna", "restatement"),
    ("Flight to Lisbon on 14 March", "My flight to Lisbon is on March 14th", "restatement"),
    ("Has twenty-one days of annual leave", "I have 21 days of annual leave", "restatement"),
    # ---- updates: the same thing, another value ----
    ("My locker number is 12", "My locker number is 14", "update"),
    ("fact 1", "fact 2", "update"),
    ("My favourite colour is blue", "My favourite colour is green", "update"),
    ("Lives in Dublin", "Lives in Cork", "update"),
    ("Works at Google", "Works at Microsoft", "update"),
    ("My dog's name is Perry", "My dog's name is Rex", "update"),
    ("Birthday: 3 May", "Birthday: 4 May", "update"),
    ("Has two kids", "Has three kids", "update"),
    ("Dentist appointment on Tuesday", "Dentist appointment on Thursday", "update"),
    ("Wifi password is 'hunter2'", "Wifi password is 'hunter3'", "update"),
    ("Runs 5k every Saturday", "Runs 10k every Saturday", "update"),
    ("Car: blue Toyota Corolla", "Car: red Toyota Corolla", "update"),
    ("My phone number is 555-0142", "My phone number is 555-0199", "update"),
    ("Dog: Perry (beagle)", "My dog's name is Perry", "update"),
    ("Pets: Perry (beagle)", "my dog's name is Perry", "update"),  # the README's example against examples/vault/Memory.md
    ("Allergic to peanuts", "Allergic to peanuts and shellfish", "update"),
    ("Works at Google", "Used to work at Google", "update"),
    ("I have a dog", "I had a dog", "update"),
    ("Speaks Spanish", "Speaks Spanish and French", "update"),
    ("Editor: Neovim", "Editor: VS Code", "update"),
    ("Wakes up at 6:30", "Wakes up at 7:00", "update"),
    ("Flight to Lisbon on 14 March", "Flight to Lisbon on 15 March", "update"),
    # ---- contradictions: negation, opposite words, a relation turned round ----
    ("My dog's name is Perry", "My dog's name is not Perry", "contradiction"),
    ("Always answer in British English", "Never answer in British English", "contradiction"),
    ("I like coffee", "I dislike coffee", "contradiction"),
    ("I eat meat", "I don't eat meat", "contradiction"),
    ("Allergic to peanuts", "Not allergic to peanuts", "contradiction"),
    ("Loves cycling", "Hates cycling", "contradiction"),
    ("Prefers tea over coffee", "Prefers coffee over tea", "contradiction"),
    ("Anna is older than Ben", "Ben is older than Anna", "contradiction"),
    ("Is a morning person", "Is not a morning person", "contradiction"),
    ("Wants notifications on", "Wants notifications off", "contradiction"),
    ("Anna is Ben's sister", "Ben is Anna's sister", "contradiction"),
    ("Sam owes Alex 20 euros", "Alex owes Sam 20 euros", "contradiction"),
    ("Flight to Lisbon from Dublin", "Flight from Lisbon to Dublin", "contradiction"),
    ("Prefers dark mode", "Prefers light mode", "contradiction"),
    ("Answer in metric units", "Answer in imperial units", "contradiction"),
    # ---- different facts that look alike ----
    ("My dog's name is Perry", "My cat's name is Perry", "different"),
    ("My name is Sam", "My sister's name is Sam", "different"),
    ("My dog's vet is Perry", "My dog is Perry", "different"),
    ("Allergic to peanuts", "Allergic to shellfish", "different"),
    ("I have a dog named Perry", "I have a cat named Luna", "different"),
    ("Brother lives in Cork", "Sister lives in Cork", "different"),
    ("Mother's birthday is 12 June", "Father's birthday is 12 June", "different"),
    ("Work laptop is a ThinkPad", "Home laptop is a ThinkPad", "different"),
    ("Drinks coffee in the morning", "Drinks tea in the morning", "different"),
    ("The red car is faster than the blue car", "The blue car is faster than the red car", "different"),
    ("Sister: Maria", "Sister-in-law: Maria", "different"),
    ("Train to work at 8:10", "Train home at 17:40", "different"),
    # ---- unrelated ----
    ("My dog's name is Perry", "I work as a nurse", "unrelated"),
    ("Lives in Dublin", "Allergic to penicillin", "unrelated"),
    ("Prefers metric units", "Sister: Maria", "unrelated"),
    ("Favourite film: Alien", "Runs 5k every Saturday", "unrelated"),
    ("Always answer in British English", "My locker number is 14", "unrelated"),
]

CHANGED = ("update", "contradiction")

# Restatements beyond the normaliser's reach (other words for the same thing). Not in the
# acceptance set: bench/memory_facts.py reports how they fare (offered as possible updates at
# best, with the model; never refused as duplicates).
HARD_RESTATEMENTS: list[tuple[str, str, str]] = [
    ("I work as a nurse", "My job is nursing", "restatement"),
    ("I'm a vegetarian", "I don't eat meat", "restatement"),
    ("Home town: Galway", "I grew up in Galway", "restatement"),
    ("Coffee: black, no sugar", "I take my coffee black without sugar", "restatement"),
    ("Car: blue Toyota Corolla", "I drive a blue Toyota Corolla", "restatement"),
    ("Hometown is Galway", "Home town is Galway", "restatement"),
    ("Married to Anna", "My wife is Anna", "restatement"),
]
