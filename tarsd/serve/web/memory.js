// The memory review on the page: proposals for Memory.md (docs/memory.md#the-memory-review), each
// approved or rejected here, or all of one kind. A proposal's text is put on the page as a text node,
// whole; the decision sends the text shown, and tarsd refuses it if the proposal says anything else by now.

import { $, el, button, describe, api, json } from "./core.js";

const MEMORY_KINDS = {
  duplicate: "Duplicates",
  supersede: "Lines another updates (they go to the history)",
  expired: "Lines whose time has passed",
  budget: "Sections to move out of a file past its budget",
  missing: "Facts the session logs stated (found by the model: check each)",
};

function renderMemoryProposals(proposals) {
  const groups = [];
  for (const kind of Object.keys(MEMORY_KINDS)) {
    const group = proposals.filter((proposal) => proposal.kind === kind);
    if (!group.length) continue;
    const section = el("div", "memory-kind");
    const head = el("div", "card-head");
    head.append(el("h3", "", `${MEMORY_KINDS[kind]} (${group.length})`));
    if (group.length > 1) {
      const ids = group.map((proposal) => proposal.id);
      const seen = group.map((proposal) => proposal.text);
      head.append(
        button(`Approve all ${group.length}`, () => decideMemory(ids, seen, true)),
        button("Reject all", () => decideMemory(ids, seen, false))
      );
    }
    const list = el("ul", "memory-list");
    for (const proposal of group) {
      const item = el("li", "pending-rule memory-proposal");
      const text = el("div", "pending-text");
      text.append(el("div", "", `#${proposal.id} ${proposal.text}`));
      if (proposal.quote) text.append(el("div", "note", "the log's line: " + proposal.quote));
      text.append(el("div", "note", "source: " + proposal.source));
      item.append(
        text,
        button("Approve", () => decideMemory([proposal.id], [proposal.text], true)),
        button("Reject", () => decideMemory([proposal.id], [proposal.text], false))
      );
      list.append(item);
    }
    section.append(head, list);
    groups.push(section);
  }
  $("memory-review-list").replaceChildren(...groups);
}

export async function loadMemoryProposals() {
  try {
    const waiting = await json(await api("/memory/proposals"));
    renderMemoryProposals(waiting.proposals);
  } catch (error) {
    if (error.status !== 401) $("memory-review-error").textContent = describe(error);
  }
}

async function reviewMemory() {
  $("memory-review-error").textContent = "";
  $("memory-review-run").disabled = true;
  $("memory-review-note").textContent = "reviewing…";
  try {
    const reply = await json(
      await api("/memory/review", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" })
    );
    const said = [`${reply.path}: ${reply.lines} lines, ${reply.new.length} new proposals, ${reply.waiting.length} waiting`];
    $("memory-review-note").textContent = said.concat(reply.left, reply.notes).join("; ");
    renderMemoryProposals(reply.waiting);
  } catch (error) {
    $("memory-review-note").textContent = "";
    if (error.status !== 401) $("memory-review-error").textContent = describe(error);
  }
  $("memory-review-run").disabled = false;
}

async function decideMemory(ids, seen, approve) {
  $("memory-review-error").textContent = "";
  try {
    const done = await json(
      await api("/memory/proposals/decide", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ ids, seen, approve }),
      })
    );
    const note = $("memory-review-note");
    if (!approve) {
      note.textContent = `Rejected ${done.decided.map((n) => "#" + n).join(", ")}: never proposed again.`;
    } else if (done.change_id) {
      note.replaceChildren(
        el("span", "", `Approved ${done.decided.map((n) => "#" + n).join(", ")}: change ${done.change_id} in ${done.path}, recorded in ${done.history}. `),
        button("Undo", () => undoMemory(done.change_id))
      );
    }
    if (done.gone.length) note.append(el("span", "", ` Not done: ${done.gone.map((n) => "#" + n).join(", ")} (its lines changed since).`));
  } catch (error) {
    if (error.status !== 401) $("memory-review-error").textContent = describe(error);
  }
  loadMemoryProposals();
}

async function undoMemory(changeId) {
  try {
    const done = await json(
      await api("/memory/undo", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ change_id: changeId }) })
    );
    $("memory-review-note").textContent = `Undid change ${done.change_id}: ${done.path} is back ${done.exact ? "byte for byte as it was" : "line by line (your edits since stay)"}.`;
  } catch (error) {
    if (error.status !== 401) $("memory-review-error").textContent = describe(error);
  }
  loadMemoryProposals();
}

$("memory-review-run").addEventListener("click", reviewMemory);
