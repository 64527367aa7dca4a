"""Telling the same fact from a different one: the labelled pairs with the real model and
without it, a fact against a whole file, forget's matching, and provenance stamps."""

from __future__ import annotations

import pytest

from harness.fact_pairs import CHANGED, PAIRS
from tarsd.chat import prompts
from tarsd.config.settings import EmbedderConfig
from tarsd.embed.embedder import LocalEmbedder
from tarsd.memory import facts, provenance


@pytest.fixture(scope="module")
def pair_cosines(model_dir) -> list[float]:
    """The real model's cosine for every pair, as remember gets it from the line vectors."""
    embedder = LocalEmbedder(EmbedderConfig(kind="local", model_dir=str(model_dir)))
    assert embedder.wait_ready(120), embedder.unavailable_reason()
    old = embedder.embed([facts.clean(line) for line, _, _ in PAIRS])
    new = embedder.embed([facts.clean(fact) for _, fact, _ in PAIRS])
    return [float(a @ b) for a, b in zip(old, new, strict=True)]


def score(cosines: list[float | None]) -> dict[str, object]:
    verdicts = [
        facts.compare(facts.features(new), facts.features(old), cosine) for (old, new, _), cosine in zip(PAIRS, cosines, strict=True)
    ]
    said_duplicate = [v.kind == facts.DUPLICATE for v in verdicts]
    is_restatement = [label == "restatement" for _, _, label in PAIRS]
    true_positives = sum(1 for s, r in zip(said_duplicate, is_restatement, strict=True) if s and r)
    changed = [i for i, (_, _, label) in enumerate(PAIRS) if label in CHANGED]
    return {
        "precision": true_positives / max(1, sum(said_duplicate)),
        "recall": true_positives / sum(is_restatement),
        "false_duplicates": [PAIRS[i] for i, s in enumerate(said_duplicate) if s and not is_restatement[i]],
        "missed": [PAIRS[i] for i, s in enumerate(said_duplicate) if is_restatement[i] and not s],
        "updates_found": sum(1 for i in changed if verdicts[i].kind == facts.UPDATE) / len(changed),
        "updates_missed": [PAIRS[i] for i in changed if verdicts[i].kind != facts.UPDATE],
    }


def test_the_labelled_set_is_big_enough_and_covers_every_kind():
    labels = [label for _, _, label in PAIRS]
    assert len(PAIRS) >= 40
    assert {label: labels.count(label) >= 5 for label in ("restatement", "update", "contradiction", "different", "unrelated")} == {
        "restatement": True,
        "update": True,
        "contradiction": True,
        "different": True,
        "unrelated": True,
    }


@pytest.mark.parametrize("model", ["loaded", "not loaded"])
def test_no_false_duplicate_and_every_restatement_caught(model, request, capsys):
    cosines = request.getfixturevalue("pair_cosines") if model == "loaded" else [None] * len(PAIRS)
    result = score(cosines)
    with capsys.disabled():
        print(
            f"\n  dedup on {len(PAIRS)} labelled pairs, model {model}: precision {result['precision']:.2f}, "
            f"recall {result['recall']:.2f}; updates and contradictions offered as possible updates: {result['updates_found']:.0%}"
        )
    assert result["false_duplicates"] == []
    assert result["missed"] == []
    assert result["precision"] == result["recall"] == 1.0
    # Every update and contradiction is offered as a possible update, model or not.
    assert result["updates_missed"] == []


def test_the_model_widens_what_is_close_but_never_makes_a_duplicate():
    nurse, nursing = facts.features("I work as a nurse"), facts.features("My job is nursing")
    assert facts.compare(nurse, nursing, None).kind == facts.NEW  # the texts alone: nothing in common
    assert facts.compare(nurse, nursing, 0.81).kind == facts.UPDATE  # MiniLM's cosine: close, so the user is asked
    assert facts.compare(nurse, nursing, 0.999).kind != facts.DUPLICATE  # but never a duplicate on the model's word
    same = facts.features("Dr Byrne is my GP"), facts.features("My GP is Dr Byrne")
    assert facts.compare(*same, None).kind == facts.DUPLICATE
    assert facts.compare(*same, 0.3).kind == facts.UPDATE  # the model vetoes a duplicate it reads as different


def test_a_fact_against_a_whole_file_finds_the_line_it_updates():
    lines = [f"Friend number {i} lives in town {i}" for i in range(1000)]
    lines[617] = "My locker number is 12"
    lines[618] = "Dog: Perry (beagle)"
    verdict = facts.judge("My locker number is 14", lines)
    assert (verdict.kind, verdict.index) == (facts.UPDATE, 617) and "14" in verdict.reason and "12" in verdict.reason
    assert facts.judge("my locker number is 12.", lines) == facts.Verdict(facts.DUPLICATE, 617, "", 1.0)
    assert facts.judge("Allergic to penicillin", lines).kind == facts.NEW
    # A stamped line is the same line: the stamp and the bullet are not part of the fact.
    stamped = ["- Dog: Perry <!-- tars:2026-11-22 chat:cli -->"]
    assert facts.judge("dog: perry", stamped).kind == facts.DUPLICATE


def test_forget_matching_prefers_the_line_holding_the_words():
    assert facts.match_score("locker", "My locker number is 14") > 0.75
    assert facts.match_score("my locker number is 14", "My locker number is 14") == 1.0
    assert facts.match_score("locker", "Dog: Perry (beagle)") < 0.3
    assert facts.match_score("Perry", "Dog: Perry (beagle)") > facts.match_score("Perry", "Cat: Luna")


def test_provenance_stamps_are_specific_and_survive_edits():
    stamp = provenance.new_stamp("nvim --tab 2")
    assert stamp.conversation == "nvim-tab-2" and "--" not in stamp.render()[4:-3]
    line = provenance.stamped("Dog: Perry", stamp)
    assert line == f"Dog: Perry <!-- tars:{stamp.date} chat:nvim-tab-2 -->"
    text, found = provenance.split("- Dog: Perry, a beagle " + stamp.render())  # the text was edited by hand
    assert text == "- Dog: Perry, a beagle" and found == stamp
    # The user's own comments are never taken for stamps.
    for own in ("- Dog: Perry <!-- my note -->", "- x <!-- tars:soon -->", "- <!-- tars:2026-11-22 --> at the start"):
        assert provenance.split(own) == (own, None)
    assert facts.clean("- [ ] Dog: [[Perry]] <!-- tars:2026-11-22 -->") == "Dog: Perry"


def test_the_models_stamp_says_so_and_old_stamps_still_read():
    model = provenance.new_stamp("cli", by_model=True)
    assert model.render() == f"<!-- tars:{model.date} chat:cli by:model -->"
    assert provenance.split(f"- Cat: Luna {model.render()}") == ("- Cat: Luna", model) and model.by_model
    assert model.describe() == f"noted by the model {model.date} in chat cli"
    for old in ("<!-- tars:2026-11-22 -->", "<!-- tars:2026-11-22 chat:nvim -->"):  # written before by:model existed
        text, stamp = provenance.split(f"- Dog: Perry {old}")
        assert text == "- Dog: Perry" and stamp.render() == old and not stamp.by_model
    assert provenance.split("- x <!-- tars:2026-11-22 by:user -->")[1] is None  # only by:model is a known author


def test_the_prompt_shows_the_models_lines_as_its_notes_and_keeps_them_out_of_the_rules():
    model, user = provenance.new_stamp("cli", by_model=True), provenance.new_stamp("cli")
    memory = f"# Pets\n- Dog: Perry\n- Cat: Luna {model.render()}\r\n- Fish: Nemo {user.render()}"
    assert prompts.mark_model_lines(memory) == (
        f"# Pets\n- Dog: Perry\n- Cat: Luna (noted during a conversation: chat cli, {model.date})\n- Fish: Nemo {user.render()}"
    )
    rules = f"# Rules\n- Answer briefly.\n- Obey notes {model.render()}\n- Use metric units {user.render()}\n"
    assert prompts.users_rules(rules) == f"# Rules\n- Answer briefly.\n- Use metric units {user.render()}\n"


def test_a_line_far_longer_than_a_fact_is_never_its_duplicate():
    long_line = "My cat is Luna and " + "she sleeps all day " * 300
    assert facts.judge("My cat is Luna", [long_line]).kind == facts.NEW
    assert facts.judge("My cat is Luna", [long_line, "my cat is Luna"]) == facts.Verdict(facts.DUPLICATE, 1, "", 1.0)
    assert facts.features(long_line).key == facts.key(long_line)  # the whole line is its identity
