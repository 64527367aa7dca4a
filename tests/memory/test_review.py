"""The memory review on a real index database and a real vault (no daemon): it proposes and changes
nothing; an approval is one change, undone byte for byte; a change is proposed once, whatever the
user decided; one review removes at most its cap and says what it left; a line keeps its provenance
through the history and back; what the model found in a session log is checked before it is even
proposed; and an approval interrupted anywhere is finished or rolled back at the next start."""

from __future__ import annotations

import json

import pytest

from tarsd.config.settings import MemoryConfig
from tarsd.memory.files import MemoryFiles
from tarsd.memory.review import MemoryReview, SessionFact, describe
from tarsd.memory.review_store import ReviewStore
from tarsd.store.database import Store

MEMORY = (
    "# Memory\n\n"
    "## Core\n"
    "- Lives in Dublin <!-- tars:2026-01-02 -->\n"
    "- Works at Acme <!-- tars:2026-01-02 chat:cli by:model -->\n"
    "- Moved to Berlin <!-- tars:2026-06-01 -->\n"
    "- I work at Acme\n"
    "\n## Notes\n"
    "- Flight to Lisbon on 2020-03-14\n"
    "- Gym locker: 14\n"
)
FILLER = "".join(f"- Fact number {n} about the thing called Item{n}\n" for n in range(30))


@pytest.fixture
def world(tmp_path, vault):
    store = Store(tmp_path / "index.sqlite3")
    files = MemoryFiles(vault, MemoryConfig())
    made = []

    def review(config: MemoryConfig | None = None) -> MemoryReview:
        made.append(MemoryReview(files, store, config or MemoryConfig(), None))
        return made[-1]

    yield vault, files, store, review
    store.close()


def memory(vault, text: str | bytes) -> None:
    (vault / "Memory.md").write_bytes(text.encode() if isinstance(text, str) else text)


def kinds(proposals) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for proposal in proposals:
        found.setdefault(proposal.kind, []).append(proposal.removes[0]["text"] if proposal.removes else proposal.adds["text"])
    return found


def test_a_review_proposes_and_changes_nothing(world):
    vault, _, _, make = world
    memory(vault, MEMORY + FILLER)
    before = (vault / "Memory.md").read_bytes()
    result = make().run("terminal")
    assert kinds(result.new) == {
        "duplicate": ["Works at Acme"],  # the model's line goes, the user's stays
        "expired": ["Flight to Lisbon on 2020-03-14"],
        "supersede": ["Lives in Dublin"],  # its stamp is months before Berlin's
    }
    assert (vault / "Memory.md").read_bytes() == before
    assert not (vault / "Memory history").exists()


@pytest.mark.parametrize(
    "shape",
    ["lf", "crlf", "no newline at the end", "unicode and a stamp of the model's"],
)
def test_an_approved_change_is_undone_byte_for_byte(world, shape):
    vault, _, _, make = world
    text = MEMORY + FILLER
    if shape == "crlf":
        text = text.replace("\n", "\r\n")
    elif shape == "no newline at the end":
        text = text.rstrip("\n")
    elif shape == "unicode and a stamp of the model's":
        text = text.replace("Gym locker: 14", "Schließfach: 14 — 🏋️ <!-- tars:2026-02-02 chat:x by:model -->")
    memory(vault, text)
    before = (vault / "Memory.md").read_bytes()
    review = make()
    result = review.run("terminal")
    decided = review.decide([p.id for p in result.new], True, who="at the terminal")
    assert decided.change is not None and sorted(decided.approved) == sorted(p.id for p in result.new)
    after = (vault / "Memory.md").read_bytes()
    assert b"Works at Acme" not in after and b"Flight to Lisbon" not in after and b"Lives in Dublin" not in after
    assert b"I work at Acme" in after and b"Moved to Berlin" in after
    change, exact, history = review.undo()
    assert exact and change.id == decided.change.id
    assert (vault / "Memory.md").read_bytes() == before
    note = (vault / history).read_text(encoding="utf-8")
    machine = review.store.machine()
    assert f"<!-- tars:memory-change {change.id}@{machine} -->" in note and f"<!-- tars:memory-undo {change.id}@{machine} -->" in note


def test_an_undo_after_an_edit_puts_the_lines_back_and_keeps_the_edit(world):
    vault, _, _, make = world
    memory(vault, MEMORY + FILLER)
    review = make()
    result = review.run("terminal")
    duplicate = next(p for p in result.new if p.kind == "duplicate")
    review.decide([duplicate.id], True)
    edited = (vault / "Memory.md").read_text().replace("- Gym locker: 14\n", "- Gym locker: 16\n")
    memory(vault, edited)
    _, exact, _ = review.undo()
    now = (vault / "Memory.md").read_text()
    assert not exact
    assert "- Works at Acme <!-- tars:2026-01-02 chat:cli by:model -->\n- Moved to Berlin" in now  # where it was, stamp and all
    assert "Gym locker: 16" in now and "Gym locker: 14" not in now


def test_a_change_is_never_proposed_twice_whatever_was_decided(world):
    vault, _, _, make = world
    memory(vault, MEMORY + FILLER)
    review = make()
    first = review.run("terminal")
    by_kind = {p.kind: p for p in first.new}
    review.decide([by_kind["expired"].id], False)  # rejected
    review.decide([by_kind["duplicate"].id], True)
    review.undo()  # applied, then undone: the duplicate is back in the file
    second = review.run("terminal")
    assert second.new == [] and second.known == 3  # all three found again, none proposed again
    assert [p.id for p in second.waiting] == [by_kind["supersede"].id]  # the one still waiting, once
    third = make().run("routine:memory-review")  # another review object on the same database: the same memory
    assert third.new == [] and len(third.waiting) == 1


def test_one_review_proposes_at_most_its_cap_and_says_what_it_left(world):
    vault, _, _, make = world
    lines = [f"- Friend number {n} is called Name{n}" for n in range(80)]
    lines += [f"- friend number {n} is called Name{n}." for n in range(25)]  # 25 restatements
    memory(vault, "# People\n" + "\n".join(lines) + "\n")
    review = make(MemoryConfig(prompt_lines=500))  # not past its budget: removals only
    result = review.run("terminal")
    assert result.cap == 10 and len(result.new) == 10 and all(p.kind == "duplicate" for p in result.new)
    assert result.left == [
        "15 more duplicates left for the next review: one review proposes removing at most 10 of 105 lines "
        "([memory] review_max_remove_percent = 10)"
    ]
    # The ten still waiting count: a second review proposes no more removals until some are decided.
    again = review.run("terminal")
    assert again.new == [] and "15 more duplicates" in again.left[0]
    review.decide([], False, kind="duplicate")
    assert len(review.run("terminal").new) == 10
    wider = make(MemoryConfig(prompt_lines=500, review_max_remove_percent=100))
    assert len(wider.run("terminal").new) == 5


def test_the_history_keeps_a_line_whole_with_its_provenance(world):
    vault, _, _, make = world
    memory(vault, MEMORY + FILLER)
    review = make()
    result = review.run("terminal")
    duplicate = next(p for p in result.new if p.kind == "duplicate")
    decided = review.decide([duplicate.id], True, who="you in Telegram (#1234)")
    note = (vault / decided.history).read_text(encoding="utf-8")
    assert "- Works at Acme <!-- tars:2026-01-02 chat:cli by:model -->" in note
    assert "approved you in Telegram (#1234)" in note and f"tarsctl memory undo {decided.change.id}" in note
    # Recorded once: a second record of the same change (a start finishing it) adds nothing.
    from tarsd.memory.review_history import record

    record(vault, "Memory history", decided.change, "x", review.store.machine())
    assert (vault / decided.history).read_text(encoding="utf-8") == note


def test_a_decision_on_a_proposal_that_says_something_else_is_refused(world):
    vault, _, _, make = world
    memory(vault, MEMORY + FILLER)
    review = make()
    proposal = review.run("terminal").new[0]
    with pytest.raises(ValueError, match="nothing was decided"):
        review.decide([proposal.id], True, seen={proposal.id: "remove 'something else'"})
    review.decide([proposal.id], True, seen={proposal.id: describe(proposal)})
    with pytest.raises(ValueError, match="applied already"):
        review.decide([proposal.id], False)


def test_a_proposal_whose_line_changed_since_is_set_aside_not_guessed(world):
    vault, _, _, make = world
    memory(vault, MEMORY + FILLER)
    review = make()
    proposal = next(p for p in review.run("terminal").new if p.kind == "expired")
    memory(vault, (vault / "Memory.md").read_text().replace("2020-03-14", "2020-03-15"))  # the user edited the line
    assert proposal.id not in [p.id for p in review.proposals()]
    with pytest.raises(ValueError, match="gone already"):
        review.decide([proposal.id], True)


def test_what_the_model_found_in_a_session_log_is_checked_before_it_is_proposed(world):
    vault, _, _, make = world
    memory(vault, MEMORY)
    quote = "- The user said their cousin Priya is moving to Lyon in spring."
    found = [
        SessionFact("Cousin Priya is moving to Lyon", "sessions/a.md", 12, quote),  # stated in its line
        SessionFact("Has a boat called Seagull", "sessions/a.md", 12, quote),  # not what that line says
        SessionFact("Two lines\nof text", "sessions/a.md", 12, quote),  # not one line
        SessionFact("I work at Acme", "sessions/a.md", 3, "- I work at Acme, the user said."),  # in Memory.md already
        SessionFact("x <!-- tars:2020-01-01 --> y", "sessions/a.md", 3, "x y"),  # a stamp of its own
    ]
    result = make().run("terminal", found)
    added = [p for p in result.new if p.kind == "missing"]
    assert [(p.adds["text"], p.source, p.body["quote"]) for p in added] == [("Cousin Priya is moving to Lyon", "sessions/a.md#L12", quote)]
    assert describe(added[0]) == "add 'Cousin Priya is moving to Lyon' under Notes (from sessions/a.md#L12)"


def test_a_section_past_the_budget_moves_to_a_note_and_back(world):
    vault, files, _, make = world
    text = (
        "# Core\n- Name: Sam\n\n# Travel\n" + "".join(f"- Visited City{n} in 20{n:02d}\n" for n in range(12)) + "\n# Food\n- Likes soup\n"
    )
    memory(vault, text)
    review = make(MemoryConfig(prompt_lines=8))
    budget = [p for p in review.run("terminal").new if p.kind == "budget"]
    assert [(p.body["section"], p.body["note"]) for p in budget] == [("Travel", "Memory/Travel.md")]
    decided = review.decide([budget[0].id], True)
    now = (vault / "Memory.md").read_text()
    assert "Visited City3" not in now and "- Moved to [[Memory/Travel|Travel]]: 12 lines <!-- tars:" in now
    assert "- Visited City3 in 2003" in (vault / "Memory" / "Travel.md").read_text()
    assert decided.change.note_path == "Memory/Travel.md"
    review.undo()
    assert (vault / "Memory.md").read_text() == text and not (vault / "Memory" / "Travel.md").exists()


def test_an_approval_interrupted_anywhere_is_finished_or_rolled_back_at_start(world):
    vault, files, store, make = world
    memory(vault, MEMORY + FILLER)
    review = make()
    proposals = review.run("terminal").new
    first, second, third = proposals[0], proposals[1], proposals[2]
    before = (vault / "Memory.md").read_text()
    journal = ReviewStore(store)
    # 1. Claimed, nothing written yet: it waits again.
    journal.claim([first.id], True)
    # 2. In the journal, the file not written: rolled back.
    journal.claim([second.id], True)
    from tarsd.memory.provenance import new_stamp
    from tarsd.memory.review_apply import apply_text

    worked = apply_text(before, journal.get([second.id]), new_stamp())
    journal.begin_change("Memory.md", before, worked.text, worked.summary, [second.id])
    # 3. In the journal and written to the file, not marked applied: marked applied, and recorded.
    journal.claim([third.id], True)
    worked3 = apply_text(before, journal.get([third.id]), new_stamp())
    third_change = journal.begin_change("Memory.md", before, worked3.text, worked3.summary, [third.id])
    memory(vault, worked3.text)
    make().recover()
    states = {p.id: p.state for p in journal.get([first.id, second.id, third.id])}
    assert states == {first.id: "pending", second.id: "pending", third.id: "applied"}
    assert (vault / "Memory.md").read_text() == worked3.text
    assert f"<!-- tars:memory-change {third_change}@{journal.machine()} -->" in next((vault / "Memory history").iterdir()).read_text()
    assert json.loads(json.dumps(journal.change(third_change).summary))["removed"][0]["raw"] in before


def test_who_may_review_decide_and_undo():
    from tarsctl.authority import Principal, refusal
    from tarsctl.protocol import DecideMemoryProposals, MemoryProposals, MemoryReview, MemoryUndo

    decide, undo = DecideMemoryProposals(ids=[1], approve=True), MemoryUndo()
    # The user's doors decide, the phone too (it writes memory lines as the user's already: /remember, forget).
    for principal in (Principal.TERMINAL, Principal.BROWSER, Principal.PHONE):
        assert refusal(principal, decide) is None and refusal(principal, undo) is None, principal
    # A model, an AI tool, a routine and text from a note never decide, nor undo.
    for principal in (Principal.MODEL, Principal.MCP_CLIENT, Principal.ROUTINE, Principal.DATA):
        assert refusal(principal, decide) is not None and refusal(principal, undo) is not None, principal
    # A review only proposes: a routine may run one; the model and an AI tool may not.
    assert refusal(Principal.ROUTINE, MemoryReview()) is None
    assert refusal(Principal.MODEL, MemoryReview()) is not None and refusal(Principal.MCP_CLIENT, MemoryReview()) is not None
    assert refusal(Principal.MCP_CLIENT, MemoryProposals()) is None  # reading what waits
    # Scheduling one writes the routines file: not the phone's.
    assert refusal(Principal.PHONE, MemoryReview(schedule="0 18 * * 0")) is not None
    assert refusal(Principal.TERMINAL, MemoryReview(schedule="0 18 * * 0")) is None


def test_two_machines_changes_of_one_number_are_both_recorded_in_a_synced_note(world, tmp_path):
    """Each machine numbers its changes in its own index: a note synced from another machine that
    holds that machine's change 1 must not stop this one from recording its own change 1."""
    vault, files, _, make = world
    memory(vault, MEMORY + FILLER)
    other = MemoryReview(files, Store(tmp_path / "other.sqlite3"), MemoryConfig(), None)  # the other machine's index
    first = other.run("terminal").new[0]
    theirs = other.decide([first.id], True)
    mine = make()
    proposal = next(p for p in mine.run("terminal").new if p.kind == "expired")
    ours = mine.decide([proposal.id], True)
    assert theirs.change.id == ours.change.id == 1 and theirs.history == ours.history
    note = (vault / ours.history).read_text(encoding="utf-8")
    assert note.count("· change 1") == 2 and "Flight to Lisbon" in note and "Works at Acme" in note


def test_every_change_to_memory_md_dates_its_new_lines_without_a_review(world):
    """A line without a stamp has no date but when tars first saw it: tars looks at Memory.md after
    each change (once it is quiet), not only when a review runs, so a first review of a file tars has
    watched for a year knows when each line appeared."""
    from harness.daemon import wait_for
    from tarsd.memory.review_store import line_key

    vault, files, store, _ = world
    review = MemoryReview(files, store, MemoryConfig(), None, settle_seconds=0.05)
    try:
        memory(vault, "# Core\n- Lives in Dublin\n")
        review.noticed()
        seen = wait_for(lambda: review.store.seen().get(line_key("Lives in Dublin")), "the first look")
        assert seen[1] is None  # the first look: written by then, no earlier bound
        memory(vault, "# Core\n- Lives in Dublin\n- On call this week\n")
        review.noticed()
        later = wait_for(lambda: review.store.seen().get(line_key("On call this week")), "the second look")
        assert later[1] == seen[0]  # written after the look that did not find it
        assert review.store.seen()[line_key("Lives in Dublin")] == seen  # an old line keeps its dates
        memory(vault, "")  # an empty file (a sync tool, an editor mid-save) teaches nothing, forgets nothing
        review.observe()
        assert set(review.store.seen()) == {line_key("Lives in Dublin"), line_key("On call this week")}
        assert json.loads(review.store._meta("memory_review_missing") or "{}") == {}
    finally:
        review.close()


def test_a_line_moved_by_hand_keeps_its_dates_and_one_written_again_is_new(tmp_path):
    """Cut and pasted (missing at a look, back within the hour), a line keeps its dates: taken for new
    it would look newer than lines it is older than. Back after longer, it is a line written again."""
    from tarsd.memory.review_store import MISSING_GRACE

    store = Store(tmp_path / "index.sqlite3")
    try:
        seen = ReviewStore(store)
        seen.observe(["a", "b"], now=1000.0)
        seen.observe(["b"], now=1060.0)  # "a" cut ...
        seen.observe(["a", "b"], now=1120.0)  # ... and pasted
        assert seen.seen()["a"] == (1000.0, None)
        seen.observe(["b"], now=2000.0)  # "a" deleted
        seen.observe(["b"], now=2000.0 + MISSING_GRACE + 1)
        assert "a" not in seen.seen()
        seen.observe(["a", "b"], now=9000.0)  # typed again: new since the look before
        assert seen.seen()["a"] == (9000.0, 2000.0 + MISSING_GRACE + 1)
        assert seen.seen()["b"] == (1000.0, None)
    finally:
        store.close()


def test_a_first_review_of_a_vault_kept_in_git_dates_the_users_lines_by_their_commits(world):
    """A file tars never watched being written: its own lines have no stamp and no look dates them,
    but git does (the commit that brought each line, and the commit before, which did not hold it).
    The same file without git: nothing can be told, nothing is proposed."""
    import os
    import shutil
    import subprocess
    import time

    git = shutil.which("git") or pytest.skip("git is not installed: the review then takes no dates from git")
    vault, _, _, make = world
    old = "# Core\n- Gym locker: 14\n- On call this week\n" + FILLER
    new = "# Core\n- Gym locker: 16\n- Gym locker: 14\n- On call this week\n" + FILLER  # the new value above: order says nothing
    memory(vault, new)
    first = make().run("terminal")
    assert first.new == []  # no stamp, no look before: no date, no proposal

    def commit(text: str, days_ago: int) -> None:
        memory(vault, text)
        when = f"{int(time.time()) - days_ago * 86400} +0000"
        env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        for args in (["add", "Memory.md"], ["-c", "user.name=me", "-c", "user.email=me@example.org", "commit", "-q", "-m", "notes"]):
            subprocess.run([git, "-C", str(vault), *args], check=True, env=env, capture_output=True)

    subprocess.run([git, "init", "-q", str(vault)], check=True, capture_output=True)
    commit(old, 200)
    commit(new, 30)
    assert (vault / "Memory.md").read_text() == new
    second = make().run("terminal")
    assert kinds(second.new) == {"supersede": ["Gym locker: 14"], "expired": ["On call this week"]}
    [update] = [p for p in second.new if p.kind == "supersede"]
    assert update.body["keep"]["text"] == "Gym locker: 16"


def test_dates_from_git_run_nothing_the_repository_configures_and_skip_lines_saved_since(world, tmp_path):
    """The vault's git configuration is the vault's: a text conversion or a file-system monitor in it
    is never run by the review. A line not committed has no date from git; a Memory.md that is a
    link is not asked about."""
    import shutil
    import subprocess

    from tarsd.memory.review_git import git_dates

    git = shutil.which("git") or pytest.skip("git is not installed: the review then takes no dates from git")
    vault, _, _, make = world
    ran = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    subprocess.run([git, "init", "-q", str(vault)], check=True, capture_output=True)
    memory(vault, "# Core\n- Gym locker: 14\n")
    (vault / ".gitattributes").write_text("Memory.md diff=evil\n")
    subprocess.run([git, "-C", str(vault), "add", "Memory.md", ".gitattributes"], check=True, capture_output=True)
    who = ["-c", "user.name=me", "-c", "user.email=me@example.org"]
    subprocess.run([git, "-C", str(vault), *who, "commit", "-q", "-m", "one"], check=True, capture_output=True)
    for key, value in (("diff.evil.textconv", str(hook)), ("core.fsmonitor", str(hook)), ("core.hooksPath", str(tmp_path))):
        subprocess.run([git, "-C", str(vault), "config", key, value], check=True)
    for name in ("post-checkout", "post-commit", "pre-commit", "reference-transaction"):
        (tmp_path / name).write_text(hook.read_text())
        (tmp_path / name).chmod(0o755)
    memory(vault, "# Core\n- Gym locker: 16\n- Gym locker: 14\n")  # saved, not committed
    dates = git_dates(vault, "Memory.md")
    assert 1 not in dates and dates[2][2] == "- Gym locker: 14"  # the line committed, where it stands now; the new one undated
    make().run("terminal")
    assert not ran.exists()
    (vault / "Elsewhere.md").write_text("- Gym locker: 14\n")
    (vault / "Memory.md").unlink()
    (vault / "Memory.md").symlink_to(vault / "Elsewhere.md")
    assert git_dates(vault, "Memory.md") == {}
