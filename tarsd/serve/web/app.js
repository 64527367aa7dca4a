// The tars web page: search with live results, a chat that streams its replies, and the routines
// and reminders with the inbox of what they said (routines.js).
// Plain browser JavaScript modules, no build step, no other site. Vault text (titles, snippets,
// answers, tool results) is only ever put on the page as text nodes or through markdown.js, which
// builds elements and text nodes: never as HTML.

import { $, el, button, plural, ApiError, describe, useToken, onSignedOut, api, json, send as post } from "./core.js";
import { markdown } from "./markdown.js";
import { refreshRoutines, stopRefreshing, useMessengers } from "./routines.js";
import { loadMemoryProposals } from "./memory.js";

const TOKEN_KEY = "tars.token";
const CONVERSATION = "web"; // the web page's conversation, shared by every browser of this user
const SEARCH_DELAY_MS = 200;
const BANDS = ["relevant", "kinda", "maybe", "not"];
const VIEWS = ["search", "chat", "routines"];
const WIDE = "(min-width: 800px)"; // as app.css: the chat always shown, search or routines beside it
const REFRESH_MS = 60_000; // routines and the inbox change on their own: a reminder fires, a routine speaks

let vaultName = "";
let searchAbort = null;
let searchTimer = 0;
let chatAbort = null;
let refreshTimer = 0;

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
  stopRefreshing();
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

// A call tarsd answers 401: the kept token no longer works (rotated), and the page asks for one.
onSignedOut((message) => {
  localStorage.removeItem(TOKEN_KEY);
  showLogin(message);
});

// ---- views: tabs on a phone, side by side on a wide screen ----

function show(view) {
  document.body.dataset.view = view;
  // On a wide screen the chat is always there, and the left column shows search unless it shows routines.
  const wide = window.matchMedia(WIDE).matches;
  for (const name of VIEWS) {
    const pressed = name === view || (wide && name === "search" && view === "chat");
    $("tab-" + name).setAttribute("aria-pressed", String(pressed));
  }
  // The proposals' card goes where the user is: in the Routines tab while that is shown, else in the chat.
  const home = view === "routines" ? $("routines") : $("chat");
  if ($("pending-rules").parentElement !== home) home.prepend($("pending-rules"));
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
  // raw: an answer's markdown as it streams in, shown as text until it is whole, then rendered
  return { message, tools, body, notes, raw: "" };
}

// An answer's text rendered as the inbox renders what routines say (markdown.js): elements and text nodes.
function render(answer, text) {
  answer.body.replaceChildren(markdown(text));
  answer.body.classList.add("md");
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
    answer.raw += data.text;
    answer.body.append(document.createTextNode(data.text));
  } else if (name === "tool_activity") {
    answer.tools.append(el("div", "tool tool-" + (data.phase === "call" ? "call" : "result"), toolLine(data)));
  } else if (name === "tool_approval") {
    answer.tools.append(approvalCard(data));
  } else if (name === "chat_done") {
    if (!answer.raw && data.text) answer.raw = data.text;
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
    if (answer.raw) render(answer, answer.raw); // all of it, as far as it came
    scrollDown();
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

// A message of the user's that no answer follows: its answer failed (the model unreachable, an
// error) or was stopped before a word of it came. The conversation keeps the message, not the error.
const UNANSWERED = "No answer came to this: it failed or was stopped before it began. Send it again to ask again.";
// An answer that is only tool calls: it broke off after them.
const BROKE_OFF = "The answer broke off after these tool calls (it failed or was stopped).";

function showEarlier(message, index, messages) {
  const shown = addMessage(message.role, message.role === "assistant" ? "" : message.text);
  if (message.role === "assistant") render(shown, message.text);
  for (const line of message.tools || []) shown.tools.append(el("div", "tool tool-call", "· " + line));
  if (message.cut > 0) shown.notes.append(el("div", "", `(${message.cut} more characters not shown)`));
  const next = messages[index + 1];
  if (message.role === "user" && (!next || next.role === "user")) {
    shown.message.classList.add("unanswered");
    shown.notes.append(el("div", "error", UNANSWERED));
  } else if (message.role === "assistant" && !message.text) {
    shown.message.classList.add("failed");
    shown.notes.append(el("div", "error", BROKE_OFF));
  }
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
    scrollDown(); // rendered whole: the last message in view
  } catch (_) {
    // the earlier messages are a help: the chat works without them
  }
}

// ---- what the model proposed: rules, changes to memory lines, routines; listed until the user
// approves or rejects each. One card, at the top of the chat, or of the Routines tab while that is
// shown (a routine proposed on a phone is decided where the routines are).

async function loadPendingRules() {
  try {
    const waiting = await json(await api("/rules/pending"));
    const items = waiting.rules.map((proposal) => {
      const item = el("li", "pending-rule");
      const actions = el("div", "pending-actions"); // side by side, under what they decide
      for (const [label, approve] of [["Approve", true], ["Reject", false]]) {
        actions.append(button(label, () => decideRule(proposal.id, proposal.rule, approve)));
      }
      item.append(proposalText(proposal), actions);
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
    await post("/rules/pending/" + encodeURIComponent(id), "POST", { approve, rule });
  } catch (error) {
    if (error.status !== 401) $("pending-error").textContent = describe(error);
  }
  loadPendingRules();
  refreshRoutines(); // an approved routine is in the list now
}

// ---- start ----

async function start() {
  let [token, refusal] = ["", ""];
  try {
    [token, refusal] = await takeToken();
  } catch (error) {
    [token, refusal] = ["", describe(error)];
  }
  if (!token) {
    showLogin(refusal);
    return;
  }
  useToken(token);
  try {
    const status = await json(await api("/status"));
    vaultName = String(status.vault).split(/[\\/]/).filter(Boolean).pop() || "";
    const counts = status.counts || {};
    const meaning = { ready: "", loading: "model loading", unavailable: "keywords only", disabled: "keywords only" };
    const parts = [vaultName, `${counts.files || 0} ${counts.files === 1 ? "note" : "notes"}`, meaning[status.embedder.state] || status.embedder.state];
    $("state").textContent = parts.filter(Boolean).join(" · ");
    useMessengers((status.channels || []).map((channel) => channel.name));
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
