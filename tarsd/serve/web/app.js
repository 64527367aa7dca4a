// The tars web page: search with live results, a chat that streams its replies, and the routines
// and reminders with the inbox of what they said.
// Plain browser JavaScript, no build step, no other site. Vault text (titles, snippets, answers,
// tool results) is only ever put on the page as text nodes: never as HTML.
"use strict";

(() => {
  const TOKEN_KEY = "tars.token";
  const CONVERSATION = "web"; // the web page's conversation, shared by every browser of this user
  const SEARCH_DELAY_MS = 200;
  const BANDS = ["relevant", "kinda", "maybe", "not"];
  const VIEWS = ["search", "chat", "routines"];
  const WIDE = "(min-width: 800px)"; // as app.css: the chat always shown, search or routines beside it
  const REFRESH_MS = 60_000; // routines and the inbox change on their own: a reminder fires, a routine speaks

  const $ = (id) => document.getElementById(id);
  let token = "";
  let vaultName = "";
  let searchAbort = null;
  let searchTimer = 0;
  let chatAbort = null;
  let refreshTimer = 0;
  let dueTimer = 0; // a refresh just after the next routine or reminder is due, when that is sooner
  let timeZone = ""; // the routines' time zone, as tarsd reports it; "" until known: the browser's

  class ApiError extends Error {
    constructor(body, status) {
      super(body && body.message ? body.message : `HTTP ${status}`);
      this.hint = (body && body.hint) || "";
      this.status = status;
    }
  }

  // An element with a class and text; text is always a text node.
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // ---- the token: from the address's #fragment (never sent to the server), then kept here ----
  // Any site can open this page with a #token= of its choosing. So a token from the address is
  // taken only when none is kept or the kept one no longer works (first setup, a rotation), and
  // only once tarsd has accepted it: a junk token can neither replace a working one nor be kept.

  async function accepted(candidate) {
    const response = await fetch("/status", { headers: { Authorization: "Bearer " + candidate }, cache: "no-store" });
    return response.ok;
  }

  // [the token to use, or "" with why not]
  async function takeToken() {
    const given = new URLSearchParams(location.hash.slice(1)).get("token") || "";
    const kept = localStorage.getItem(TOKEN_KEY) || "";
    if (!given) return [kept, ""];
    history.replaceState(null, "", location.pathname + location.search); // out of the address bar and history
    if (given === kept || (kept && (await accepted(kept)))) return [kept, ""];
    if (await accepted(given)) {
      localStorage.setItem(TOKEN_KEY, given);
      return [given, ""];
    }
    // Not kept: the kept one (if any) meets tarsd's own answer next, as on any visit.
    return kept ? [kept, ""] : ["", "tarsd refused the token in the address: paste the one that “tarsctl http token” prints."];
  }

  function showLogin(message) {
    clearInterval(refreshTimer); // nothing to refresh without a token (and the field keeps its focus)
    clearTimeout(dueTimer);
    $("app").hidden = true;
    document.querySelector("header .tabs").hidden = true; // nothing to switch between until the page opens
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").focus();
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    localStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    start();
  });

  async function api(path, options = {}) {
    const headers = Object.assign({ Authorization: "Bearer " + token }, options.headers || {});
    const response = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
    if (response.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      showLogin("tarsd refused the token: paste the one that “tarsctl http token” prints.");
      throw new ApiError({ message: "the token was refused" }, 401);
    }
    return response;
  }

  async function json(response) {
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) throw new ApiError(body, response.status);
    return body;
  }

  function describe(error) {
    return error.hint ? `${error.message} (${error.hint})` : error.message || String(error);
  }

  // ---- views: tabs on a phone, side by side on a wide screen ----

  function show(view) {
    document.body.dataset.view = view;
    // On a wide screen the chat is always there, and the left column shows search unless it shows routines.
    const wide = window.matchMedia(WIDE).matches;
    for (const name of VIEWS) {
      const pressed = name === view || (wide && name === "search" && view === "chat");
      $("tab-" + name).setAttribute("aria-pressed", String(pressed));
    }
    if (view === "search") $("q").focus();
    else if (view === "chat") $("message").focus();
  }

  $("tab-search").addEventListener("click", () => show("search"));
  $("tab-chat").addEventListener("click", () => show("chat"));
  $("tab-routines").addEventListener("click", () => {
    show("routines");
    refreshRoutines();
  });

  // ---- search ----

  function obsidianUri(path) {
    return "obsidian://open?vault=" + encodeURIComponent(vaultName) + "&file=" + encodeURIComponent(path);
  }

  // "a **word** here" -> text, <mark>word</mark>, text: split on the markers, never parsed as HTML.
  function snippet(text) {
    const paragraph = el("p", "snippet");
    const parts = String(text).split("**");
    if (parts.length % 2 === 0) {
      paragraph.textContent = text; // unbalanced markers: the text as it is
      return paragraph;
    }
    parts.forEach((part, i) => {
      if (part) paragraph.append(i % 2 ? el("mark", "", part) : document.createTextNode(part));
    });
    return paragraph;
  }

  function renderHit(hit) {
    const item = el("li", "hit");
    const head = el("div", "hit-head");
    const link = el("a", "hit-title", hit.title || hit.path);
    link.href = obsidianUri(hit.path);
    link.rel = "noreferrer";
    link.title = "open in Obsidian";
    const band = BANDS.includes(hit.band) ? hit.band : "not";
    head.append(link, el("span", "band band-" + band, `${hit.band} ${Number(hit.score).toFixed(2)}`));
    item.append(head);
    if (hit.heading) item.append(el("div", "hit-heading", hit.heading)); // "" when it only repeats the title
    item.append(snippet(hit.snippet));
    item.append(el("div", "hit-path", `${hit.path}:${hit.start_line}`));
    return item;
  }

  function coverageNotes(coverage, semantic) {
    const notes = [];
    if (!coverage) return notes;
    // The same sentences as Coverage.incomplete() in tarsctl/protocol.py, for the CLI and MCP.
    if (coverage.vault_error) notes.push(`${coverage.vault_error}: results come from the index as it was before.`);
    if (coverage.watcher) notes.push(coverage.watcher.charAt(0).toUpperCase() + coverage.watcher.slice(1) + ".");
    if (!coverage.reconciled) notes.push("The index is still being built: results may be missing.");
    if (semantic && coverage.pending_vectors > 0 && coverage.embedder !== "disabled") {
      notes.push(`${coverage.pending_vectors} of ${coverage.chunks} passages are not embedded yet.`);
    }
    return notes;
  }

  async function runSearch() {
    const query = $("q").value.trim();
    if (searchAbort) searchAbort.abort();
    searchAbort = null;
    if (!query) {
      $("results").replaceChildren();
      $("search-note").textContent = "";
      return;
    }
    const abort = new AbortController();
    searchAbort = abort;
    const params = new URLSearchParams({ q: query, mode: $("mode").value, limit: "20" });
    try {
      const reply = await json(await api("/search?" + params.toString(), { signal: abort.signal }));
      if (abort.signal.aborted) return;
      $("results").replaceChildren(...reply.results.map(renderHit));
      const notes = [...reply.warnings, ...coverageNotes(reply.coverage, reply.mode !== "fts")];
      if (!reply.results.length) notes.unshift("No results.");
      $("search-note").textContent = notes.join(" ");
    } catch (error) {
      if (error.name === "AbortError" || error.status === 401) return;
      $("results").replaceChildren();
      $("search-note").textContent = describe(error);
    }
  }

  $("q").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, SEARCH_DELAY_MS);
  });
  $("mode").addEventListener("change", runSearch);
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(searchTimer);
    runSearch();
  });

  // ---- chat ----

  function scrollDown() {
    const messages = $("messages");
    messages.scrollTop = messages.scrollHeight;
  }

  function addMessage(role, text) {
    const message = el("div", "message message-" + role);
    message.append(el("div", "who", role === "user" ? "you" : "tars"));
    const tools = el("div", "tools");
    const body = el("div", "body", text);
    const notes = el("div", "message-notes");
    message.append(tools, body, notes);
    $("messages").append(message);
    scrollDown();
    return { message, tools, body, notes };
  }

  // What came of a call of another MCP server's tool (tool_activity's outcome), for people.
  const OUTCOMES = {
    ok: "done",
    error: "the tool reported an error",
    failed: "failed",
    unavailable: "not run: the server is unavailable",
    denied: "not run: you said no",
    timed_out: "not run: no answer in time",
    not_asked: "not run: it needs your approval",
    cancelled: "not run: stopped",
    refused: "not run",
  };

  function toolLine(data) {
    if (data.phase === "call") {
      const args = Object.entries(data.arguments || {})
        .map(([key, value]) => `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`)
        .join(", ");
      return `· ${data.name}(${args.length > 120 ? args.slice(0, 117) + "…" : args})`;
    }
    if (data.server) {
      const by = data.approved_by ? ` (approved by ${data.approved_by})` : "";
      return `· ${data.server} ${data.tool}: ${OUTCOMES[data.outcome] || data.outcome}${by}`;
    }
    return `· ${data.name}: ${data.summary || "done"}`;
  }

  // A call waiting for the user: server, tool and arguments shown as text, and the answer posted
  // to /chat/approvals/{id}. "Always" asks once more before it writes an allow rule.
  function approvalCard(data) {
    const card = el("div", "approval");
    card.append(el("div", "approval-head", `${data.server} wants to run ${data.tool}`));
    card.append(el("div", "approval-why", `${data.why}; answer within ${Math.round(data.timeout_seconds)} s`));
    card.append(el("pre", "approval-arguments", JSON.stringify(data.arguments, null, 2)));
    const actions = el("div", "approval-actions");
    const state = el("div", "approval-state");
    card.append(actions, state);

    function button(label, onClick) {
      const node = el("button", "", label);
      node.type = "button";
      node.addEventListener("click", onClick);
      return node;
    }

    async function answer(approve, always) {
      actions.replaceChildren();
      state.textContent = "sending…";
      try {
        await json(
          await api("/chat/approvals/" + encodeURIComponent(data.approval), {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ approve, always }),
          })
        );
        state.textContent = approve ? (always ? "approved, and always from now on" : "approved") : "declined";
      } catch (error) {
        if (error.status !== 401) state.textContent = describe(error);
      }
    }

    function choose() {
      actions.replaceChildren(
        button("Run it", () => answer(true, false)),
        button("Don't", () => answer(false, false)),
        button("Always…", () => {
          actions.replaceChildren(
            el("span", "", `Always run ${data.server} ${data.tool} without asking? This adds an allow rule to ${data.rules_file}.`),
            button("Yes, always", () => answer(true, true)),
            button("Cancel", choose)
          );
        })
      );
    }

    choose();
    return card;
  }

  function onChatEvent(answer, name, data) {
    if (name === "chat_delta") {
      answer.body.append(document.createTextNode(data.text));
    } else if (name === "tool_activity") {
      answer.tools.append(el("div", "tool tool-" + (data.phase === "call" ? "call" : "result"), toolLine(data)));
    } else if (name === "tool_approval") {
      answer.tools.append(approvalCard(data));
    } else if (name === "chat_done") {
      if (!answer.body.textContent && data.text) answer.body.textContent = data.text;
      if (data.cancelled) answer.notes.append(el("div", "", "stopped"));
      if (data.session_log) answer.notes.append(el("div", "", "session log: " + data.session_log));
      for (const warning of data.warnings || []) answer.notes.append(el("div", "", warning));
      loadPendingRules(); // the model may have proposed a rule or a routine in this answer
      refreshRoutines(); // or set a reminder
    } else if (name === "error") {
      answer.message.classList.add("failed");
      answer.notes.append(el("div", "error", describe(new ApiError(data, 0))));
    }
    scrollDown();
  }

  // Server-sent events from a POST (EventSource can only GET): blocks split on blank lines.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trimStart();
        }
        if (data) onEvent(name, JSON.parse(data));
      }
    }
  }

  function setBusy(busy) {
    $("send").hidden = busy;
    $("stop").hidden = !busy;
    $("new").disabled = busy;
  }

  async function send() {
    const text = $("message").value.trim();
    if (!text || chatAbort) return;
    $("message").value = "";
    addMessage("user", text);
    const answer = addMessage("assistant", "");
    answer.message.classList.add("streaming");
    chatAbort = new AbortController();
    setBusy(true);
    try {
      const response = await api("/chat", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ conversation_id: CONVERSATION, message: text, stream: true }),
        signal: chatAbort.signal,
      });
      if (!response.ok) await json(response);
      await readEvents(response, (name, data) => onChatEvent(answer, name, data));
    } catch (error) {
      if (error.name === "AbortError") answer.notes.append(el("div", "", "stopped"));
      else if (error.status !== 401) onChatEvent(answer, "error", { message: error.message, hint: error.hint });
    } finally {
      chatAbort = null;
      setBusy(false);
      answer.message.classList.remove("streaming");
    }
  }

  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  // A phone's keyboard has no Shift+Enter to offer: its return key sends.
  if (window.matchMedia("(pointer: coarse)").matches) $("message").placeholder = "Ask tars… (return sends)";
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  $("stop").addEventListener("click", () => {
    if (chatAbort) chatAbort.abort(); // closing the stream cancels the answer in tarsd
  });
  $("new").addEventListener("click", async () => {
    try {
      const ended = await json(await api("/conversations/" + encodeURIComponent(CONVERSATION), { method: "DELETE" }));
      $("messages").replaceChildren();
      const notes = ended.session_log ? ["Session log written: " + ended.session_log + "."] : [];
      const sentences = [...notes, ...(ended.warnings || [])].map((text) => (/[.!?]$/.test(text) ? text : text + "."));
      $("chat-note").textContent = [...sentences, "A new conversation starts."].join(" ");
    } catch (error) {
      if (error.status !== 401) $("chat-note").textContent = describe(error);
    }
  });

  const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;

  // A conversation carried on from before (this or another browser): its last messages, shown
  // as they were said; the note says only what the page could not show.
  function hiddenNote(history) {
    const { omitted, compacted } = history;
    const notes = [];
    if (omitted > 0) {
      const [are, them] = omitted === 1 ? ["is", "it"] : ["are", "them"];
      notes.push(`${plural(omitted, "earlier message")} ${are} not shown here; tars still takes ${them} into account.`);
    }
    if (compacted > 0) {
      const what = omitted > 0 ? `${compacted} before ${omitted === 1 ? "it" : "those"}` : plural(compacted, "earlier message");
      notes.push(`${what} ${compacted === 1 ? "is" : "are"} summarised at the top; search finds them in the session logs in sessions/.`);
    }
    return notes.length ? [`Carrying on the conversation “${CONVERSATION}”:`, ...notes].join(" ") : "";
  }

  function showEarlier(message) {
    const shown = addMessage(message.role, message.text);
    for (const line of message.tools || []) shown.tools.append(el("div", "tool tool-call", "· " + line));
    if (message.cut > 0) shown.notes.append(el("div", "", `(${message.cut} more characters not shown)`));
  }

  async function loadConversation() {
    try {
      const history = await json(await api("/conversations/" + encodeURIComponent(CONVERSATION) + "/messages?limit=50"));
      if (chatAbort || $("messages").childElementCount) return; // a message sent meanwhile: the page has moved on
      $("chat-note").textContent = hiddenNote(history); // first: the note above takes room from the messages' pane
      if (history.summary) {
        const summary = addMessage("summary", history.summary);
        summary.message.firstChild.textContent = "tars's summary of the earlier messages";
      }
      history.messages.forEach(showEarlier);
    } catch (_) {
      // the earlier messages are a help: the chat works without them
    }
  }

  // ---- rules the model proposed: listed until the user approves or rejects each ----

  async function loadPendingRules() {
    try {
      const waiting = await json(await api("/rules/pending"));
      const items = waiting.rules.map((proposal) => {
        const item = el("li", "pending-rule");
        item.append(proposalText(proposal));
        for (const [label, approve] of [["Approve", true], ["Reject", false]]) {
          const button = el("button", "", label);
          button.type = "button";
          button.addEventListener("click", () => decideRule(proposal.id, proposal.rule, approve));
          item.append(button);
        }
        return item;
      });
      $("pending-list").replaceChildren(...items);
      $("pending-rules").hidden = items.length === 0;
    } catch (error) {
      if (error.status !== 401) $("pending-error").textContent = describe(error);
    }
  }

  // A routine is shown whole, as the TOML table approving writes into the routines file: its
  // schedule, prompt, targets and the tools it may use without asking are all in it.
  function proposalText(proposal) {
    if (proposal.action !== "routine") return el("span", "pending-text", describeProposal(proposal));
    const text = el("div", "pending-text pending-routine");
    text.append(el("div", "pending-heading", "Add the routine"), el("pre", "pending-toml", proposal.rule));
    if (proposal.path) text.append(el("div", "note", "to " + proposal.path));
    return text;
  }

  // What approving would change: a rule, or a change to one of the user's memory lines.
  function describeProposal(proposal) {
    if (proposal.action === "replace") return `In ${proposal.path}, replace your line “${proposal.target}” with “${proposal.rule}”`;
    if (proposal.action === "remove") return `Remove your line “${proposal.rule}” from ${proposal.path}`;
    return proposal.rule;
  }

  // The decision names the text shown: tarsd refuses it if the proposal under that id says anything
  // else (a card left open while the list changed).
  async function decideRule(id, rule, approve) {
    $("pending-error").textContent = "";
    try {
      await json(
        await api("/rules/pending/" + encodeURIComponent(id), {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ approve, rule }),
        })
      );
    } catch (error) {
      if (error.status !== 401) $("pending-error").textContent = describe(error);
    }
    loadPendingRules();
    refreshRoutines(); // an approved routine is in the list now
  }

  // ---- the memory review: proposals for Memory.md, each approved or rejected here, or all of a kind ----
  // A proposal's text is shown whole, as a text node; the decision sends the text shown, and tarsd
  // refuses it if the proposal says anything else by now.

  const MEMORY_KINDS = {
    duplicate: "Duplicates",
    supersede: "Lines another updates (they go to the history)",
    expired: "Lines whose time has passed",
    budget: "Sections to move out of a file past its budget",
    missing: "Facts the session logs stated (found by the model: check each)",
  };

  function memoryButton(label, onClick) {
    const button = el("button", "", label);
    button.type = "button";
    button.addEventListener("click", onClick);
    return button;
  }

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
          memoryButton(`Approve all ${group.length}`, () => decideMemory(ids, seen, true)),
          memoryButton("Reject all", () => decideMemory(ids, seen, false))
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
          memoryButton("Approve", () => decideMemory([proposal.id], [proposal.text], true)),
          memoryButton("Reject", () => decideMemory([proposal.id], [proposal.text], false))
        );
        list.append(item);
      }
      section.append(head, list);
      groups.push(section);
    }
    $("memory-review-list").replaceChildren(...groups);
  }

  async function loadMemoryProposals() {
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
          memoryButton("Undo", () => undoMemory(done.change_id))
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

  // ---- routines and reminders, and the inbox of what they said ----

  // A time in the routines' time zone (the one their schedules are read in), else the browser's.
  function when(seconds) {
    if (!seconds) return "";
    const options = { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" };
    const date = new Date(seconds * 1000);
    try {
      return date.toLocaleString(undefined, timeZone ? Object.assign({ timeZone }, options) : options);
    } catch (_) {
      return date.toLocaleString(undefined, options); // a zone this browser does not know
    }
  }

  // What came of a routine's run (RunInfo.outcome), for people.
  const RUN_OUTCOMES = {
    running: "running now",
    spoke: "spoke",
    quiet: "had nothing to say",
    reminded: "reminded you",
    skipped: "skipped",
    limited: "not run: over its limit",
    failed: "failed",
    interrupted: "interrupted",
  };

  function lastRunLine(run) {
    const at = when(run.started_at || run.scheduled_at);
    const late = run.late ? " (late)" : "";
    const detail = run.detail ? ": " + run.detail : "";
    return `last: ${RUN_OUTCOMES[run.outcome] || run.outcome}${at ? " " + at : ""}${late}${detail}`;
  }

  function actionButton(label, onClick) {
    const button = el("button", "", label);
    button.type = "button";
    button.addEventListener("click", onClick);
    return button;
  }

  function renderRoutine(info) {
    const reminder = info.kind === "reminder";
    const item = el("li", "routine" + (info.paused ? " paused" : ""));
    item.dataset.name = info.name;
    const head = el("div", "routine-head");
    head.append(el("span", "routine-name", info.name), el("span", "routine-schedule", info.schedule));
    const state = info.paused ? "paused" : info.next_run ? "next " + when(info.next_run) : "no next run";
    head.append(el("span", "routine-state", state));
    item.append(head, el("div", "routine-prompt", reminder ? info.text : info.prompt));
    const meta = [];
    if (info.last_run) meta.push(lastRunLine(info.last_run));
    if (info.deliver && info.deliver.length) meta.push("to " + info.deliver.join(", "));
    if (info.tools && info.tools.length) meta.push("may use without asking: " + info.tools.join(", "));
    if (info.quiet) meta.push("speaks only when needed");
    if (info.by === "model") meta.push("set by tars when you asked");
    for (const line of meta) item.append(el("div", "routine-meta", line));

    const actions = el("div", "routine-actions");
    const act = (path, method) => routineAction(info.name, path, method, item);
    actions.append(info.paused ? actionButton("Resume", () => act("/resume", "POST")) : actionButton("Pause", () => act("/pause", "POST")));
    if (!reminder) actions.append(actionButton("Run now", () => runRoutine(info.name, item)));
    actions.append(
      actionButton("Remove", () => {
        if (window.confirm(`Remove the ${reminder ? "reminder" : "routine"} “${info.name}”?`)) act("", "DELETE");
      })
    );
    item.append(actions);
    return item;
  }

  function setButtons(item, enabled) {
    for (const button of item.querySelectorAll("button")) button.disabled = !enabled;
  }

  async function routineAction(name, path, method, item) {
    $("routines-error").textContent = "";
    setButtons(item, false);
    try {
      await json(await api("/routines/" + encodeURIComponent(name) + path, { method }));
    } catch (error) {
      if (error.status !== 401) $("routines-error").textContent = describe(error);
    }
    refreshRoutines();
  }

  // A run now: the answer comes when the run ends (a model's answer may take a while).
  async function runRoutine(name, item) {
    $("routines-error").textContent = "";
    setButtons(item, false);
    const status = el("div", "routine-meta", "running…");
    item.append(status);
    try {
      const ran = await json(await api("/routines/" + encodeURIComponent(name) + "/run", { method: "POST" }));
      status.textContent = lastRunLine(ran.run);
    } catch (error) {
      status.remove();
      if (error.status !== 401) $("routines-error").textContent = describe(error);
    }
    refreshRoutines();
  }

  async function loadRoutines() {
    try {
      const reply = await json(await api("/routines"));
      timeZone = reply.timezone || "";
      const notes = [];
      if (!reply.enabled) notes.push("Routines do not run on this machine ([routines] enabled = false).");
      if (reply.problem) notes.push(reply.problem);
      if (reply.skipped && reply.skipped.length) notes.push("Missed while tarsd was stopped: " + reply.skipped.join("; ") + ".");
      if (!reply.routines.length) notes.push("No routines or reminders yet: set a reminder below, or ask tars in the chat.");
      $("routines-note").textContent = notes.join(" ");
      $("routine-list").replaceChildren(...reply.routines.map(renderRoutine));
      if (reply.enabled) refreshWhenDue(reply.routines);
    } catch (error) {
      if (error.status !== 401) $("routines-note").textContent = describe(error);
    }
  }

  function deliveryLine(delivery) {
    if (delivery.state === "failed") return `${delivery.target}: not delivered: ${delivery.last_error || "gave up"}`;
    const retry = delivery.next_attempt_at ? `, next try ${when(delivery.next_attempt_at)}` : "";
    const error = delivery.last_error ? `: ${delivery.last_error}` : "";
    return `${delivery.target}: not delivered yet (${plural(delivery.attempts, "attempt")}${retry})${error}`;
  }

  function renderInboxMessage(message) {
    const item = el("li", "inbox-message" + (message.read ? "" : " unread"));
    const meta = el("div", "inbox-meta");
    meta.append(el("span", "inbox-source", message.source), document.createTextNode(" · " + when(message.created_at)));
    item.append(meta);
    if (message.title) item.append(el("div", "inbox-title", message.title));
    item.append(el("div", "inbox-text", message.text));
    for (const delivery of message.deliveries || []) {
      if (delivery.state !== "sent") item.append(el("div", "inbox-delivery " + delivery.state, deliveryLine(delivery)));
    }
    return item;
  }

  function showUnread(unread) {
    $("unread-badge").textContent = String(unread);
    $("unread-badge").hidden = unread === 0;
    $("inbox-count").textContent = unread ? `(${unread} unread)` : "";
    $("mark-all-read").hidden = unread === 0;
    document.title = unread ? `(${unread}) tars` : "tars";
  }

  async function loadInbox() {
    try {
      const reply = await json(await api("/inbox?limit=20"));
      const newestFirst = [...reply.messages].sort((a, b) => b.created_at - a.created_at);
      $("inbox-list").replaceChildren(...newestFirst.map(renderInboxMessage));
      $("inbox-note").textContent = newestFirst.length ? "" : "Nothing yet: what routines and reminders say comes here.";
      showUnread(reply.unread);
    } catch (error) {
      if (error.status !== 401) $("inbox-note").textContent = describe(error);
    }
  }

  // What a reminder said should show without waiting for the minute's refresh: the page looks
  // again a second after the soonest is due, and every second while one is overdue (tarsd may be
  // running it), but not for one overdue by more than a minute (tarsd was stopped: it says so).
  function refreshWhenDue(routines) {
    clearTimeout(dueTimer);
    const due = routines.filter((info) => !info.paused && info.next_run > 0).map((info) => info.next_run * 1000);
    if (!due.length) return;
    const wait = Math.min(...due) - Date.now();
    if (wait < -REFRESH_MS || wait > REFRESH_MS) return;
    dueTimer = setTimeout(refreshRoutines, Math.max(wait, 0) + 1000);
  }

  function refreshRoutines() {
    loadRoutines();
    loadInbox();
  }

  $("mark-all-read").addEventListener("click", async () => {
    try {
      const reply = await json(
        await api("/inbox/read", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ all: true }) })
      );
      showUnread(reply.unread);
    } catch (error) {
      if (error.status !== 401) $("inbox-note").textContent = describe(error);
    }
    loadInbox();
  });

  $("remind-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const whenText = $("remind-when").value.trim();
    const text = $("remind-text").value.trim();
    if (!whenText || !text) return;
    $("remind-send").disabled = true;
    $("remind-note").textContent = "";
    try {
      const saved = await json(
        await api("/remind", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ when: whenText, text }),
        })
      );
      $("remind-when").value = "";
      $("remind-text").value = "";
      const at = when(saved.routine.next_run);
      $("remind-note").textContent = `Set${at ? " for " + at : ""} (${saved.routine.name}).`;
    } catch (error) {
      if (error.status !== 401) $("remind-note").textContent = describe(error);
    }
    $("remind-send").disabled = false;
    refreshRoutines();
  });

  // ---- start ----

  async function start() {
    let refusal = "";
    try {
      [token, refusal] = await takeToken();
    } catch (error) {
      [token, refusal] = ["", describe(error)];
    }
    if (!token) {
      showLogin(refusal);
      return;
    }
    try {
      const status = await json(await api("/status"));
      vaultName = String(status.vault).split(/[\\/]/).filter(Boolean).pop() || "";
      const counts = status.counts || {};
      const meaning = { ready: "", loading: "model loading", unavailable: "keywords only", disabled: "keywords only" };
      const parts = [vaultName, `${counts.files || 0} ${counts.files === 1 ? "note" : "notes"}`, meaning[status.embedder.state] || status.embedder.state];
      $("state").textContent = parts.filter(Boolean).join(" · ");
      $("login").hidden = true;
      document.querySelector("header .tabs").hidden = false;
      $("app").hidden = false;
      show(document.body.dataset.view || "search");
      loadConversation();
      loadPendingRules();
      loadMemoryProposals();
      refreshRoutines();
      clearInterval(refreshTimer); // start() runs again after a token is pasted: one timer
      refreshTimer = setInterval(refreshRoutines, REFRESH_MS);
    } catch (error) {
      if (error.status !== 401) showLogin(describe(error));
    }
  }

  start();
})();
