// The Routines tab: the routines and reminders (with Pause/Resume, Run now, Edit and Remove), the
// form that adds or changes a routine (its schedule checked by tarsd as it is typed, with the next
// runs), the "Remind me" form, and the inbox of what they said, rendered as the chat renders answers.

import { $, el, button, plural, api, json, send, describe, when, useTimeZone, routinesTimeZone, fieldError } from "./core.js";
import { markdown } from "./markdown.js";

const REFRESH_MS = 60_000; // as app.js: a refresh just after the next routine or reminder is due, when that is sooner
const PREVIEW_DELAY_MS = 300; // the schedule is checked once typing pauses this long
const PREVIEW_RUNS = 3;
const BASE_TARGETS = ["inbox", "note"]; // besides the messengers enabled in this tarsd

let dueTimer = 0;
let messengers = []; // the messenger channels this tarsd has enabled ([telegram], [whatsapp]): targets too

export function useMessengers(names) {
  messengers = names.filter((name) => name === "telegram" || name === "whatsapp");
}

export function stopRefreshing() {
  clearTimeout(dueTimer);
}

// ---- the list ----

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

// A routine whose run is built in (RoutineInfo.review) instead of a prompt: what it does, for people.
const BUILT_IN_RUNS = {
  memory: "Runs the memory review: it proposes changes to Memory.md and changes nothing until you approve them (the Memory review card in the chat).",
};

function builtInRun(review) {
  return BUILT_IN_RUNS[review] || `Runs the built-in review “${review}”.`;
}

function lastRunLine(run) {
  const at = when(run.started_at || run.scheduled_at);
  const late = run.late ? " (late)" : "";
  const detail = run.detail ? ": " + run.detail : "";
  return `last: ${RUN_OUTCOMES[run.outcome] || run.outcome}${at ? " " + at : ""}${late}${detail}`;
}

function renderRoutine(info) {
  const reminder = info.kind === "reminder";
  const item = el("li", "routine" + (info.paused ? " paused" : ""));
  item.dataset.name = info.name;
  const head = el("div", "routine-head");
  // A reminder's name (remind-1127-1500) is for tarsctl: the page says what it is.
  const name = el("span", "routine-name", reminder ? "Reminder" : info.name);
  name.title = info.name;
  head.append(name, el("span", "routine-schedule", info.schedule));
  const state = info.paused ? "paused" : info.next_run ? "next " + when(info.next_run) : "no next run";
  head.append(el("span", "routine-state", state));
  const body = reminder ? info.text : info.review ? builtInRun(info.review) : info.prompt;
  item.append(head, el("div", "routine-prompt" + (info.review ? " routine-review" : ""), body));
  const meta = [];
  if (info.last_run) meta.push(lastRunLine(info.last_run));
  if (info.deliver && info.deliver.length) meta.push("to " + info.deliver.join(", "));
  if (info.tools && info.tools.length) meta.push("may use without asking: " + info.tools.join(", "));
  if (info.quiet) meta.push("speaks only when needed");
  if (info.by === "model") meta.push("set by tars when you asked");
  for (const line of meta) item.append(el("div", "routine-meta", line));

  const actions = el("div", "routine-actions");
  const act = (path, method) => routineAction(info.name, path, method, item);
  actions.append(info.paused ? button("Resume", () => act("/resume", "POST")) : button("Pause", () => act("/pause", "POST")));
  if (!reminder) actions.append(button("Run now", () => runRoutine(info.name, item)), button("Edit", () => openForm(info)));
  actions.append(
    button("Remove", () => {
      if (window.confirm(`Remove the ${reminder ? "reminder" : "routine"} “${info.name}”?`)) act("", "DELETE");
    })
  );
  item.append(actions);
  return item;
}

function setButtons(item, enabled) {
  for (const node of item.querySelectorAll(".routine-actions button")) node.disabled = !enabled;
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
    useTimeZone(reply.timezone);
    $("routines-zone").textContent = reply.timezone ? `Times are in ${reply.timezone}, the routines' time zone.` : "";
    const notes = [];
    if (!reply.enabled) notes.push("Routines do not run on this machine ([routines] enabled = false).");
    if (reply.problem) notes.push(reply.problem);
    if (reply.skipped && reply.skipped.length) notes.push("Missed while tarsd was stopped: " + reply.skipped.join("; ") + ".");
    if (!reply.routines.length) notes.push("No routines or reminders yet: add one, set a reminder below, or ask tars in the chat.");
    $("routines-note").textContent = notes.join(" ");
    // The form, open on a routine, stays open on it (taken out of the list while the list is made anew).
    const form = $("routine-form");
    const openOn = form.closest(".routine");
    $("routine-list").before(form);
    $("routine-list").replaceChildren(...reply.routines.map(renderRoutine));
    if (openOn) placeForm(openOn.dataset.name);
    if (reply.enabled) refreshWhenDue(reply.routines);
  } catch (error) {
    if (error.status !== 401) $("routines-note").textContent = describe(error);
  }
}

// ---- the inbox ----

function deliveryLine(delivery) {
  if (delivery.state === "failed") return `${delivery.target}: not delivered: ${delivery.last_error || "gave up"}`;
  const retry = delivery.next_attempt_at ? `, next try ${when(delivery.next_attempt_at)}` : "";
  const error = delivery.last_error ? `: ${delivery.last_error}` : "";
  return `${delivery.target}: not delivered yet (${plural(delivery.attempts, "attempt")}${retry})${error}`;
}

// Who said it, for people: "Reminder", or the routine's name (the source is reminder:NAME or routine:NAME).
function sourceLabel(message) {
  const colon = String(message.source).indexOf(":");
  const [kind, name] = colon < 0 ? [message.source, ""] : [message.source.slice(0, colon), message.source.slice(colon + 1)];
  if (kind === "reminder") return "Reminder";
  if (kind === "routine" && name) return name;
  return message.title || message.source;
}

function renderInboxMessage(message) {
  const item = el("li", "inbox-message" + (message.read ? "" : " unread"));
  const meta = el("div", "inbox-meta");
  const label = sourceLabel(message);
  const source = el("span", "inbox-source", label);
  source.title = message.source; // the name tarsctl inbox shows, for whoever looks for it
  meta.append(source, document.createTextNode(" · " + when(message.created_at)));
  item.append(meta);
  if (message.title && message.title !== label) item.append(el("div", "inbox-title", message.title));
  const text = el("div", "inbox-text md");
  text.append(markdown(message.text));
  item.append(text);
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

export function refreshRoutines() {
  loadRoutines();
  loadInbox();
}

$("mark-all-read").addEventListener("click", async () => {
  try {
    showUnread((await send("/inbox/read", "POST", { all: true })).unread);
  } catch (error) {
    if (error.status !== 401) $("inbox-note").textContent = describe(error);
  }
  loadInbox();
});

// ---- "Remind me": its errors under the field they are about, in view ----

$("remind-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const [whenField, whenError] = [$("remind-when"), $("remind-when-error")];
  const [textField, textError] = [$("remind-text"), $("remind-text-error")];
  fieldError(whenField, whenError, "");
  fieldError(textField, textError, "");
  $("remind-note").textContent = "";
  const whenText = whenField.value.trim();
  const text = textField.value.trim();
  if (!whenText) return fieldError(whenField, whenError, "Say when: “in 10 min”, “18:30”, or “2026-12-24 18:00”.");
  if (!text) return fieldError(textField, textError, "Say what to remind you of.");
  $("remind-send").disabled = true;
  try {
    const saved = await send("/remind", "POST", { when: whenText, text });
    whenField.value = "";
    textField.value = "";
    const at = when(saved.routine.next_run);
    $("remind-note").textContent = `Set${at ? " for " + at : ""}.`;
    $("remind-note").scrollIntoView({ block: "nearest" });
  } catch (error) {
    // What tarsd refuses here is the time (a text too long is cut short by the field itself).
    if (error.status !== 401) fieldError(whenField, whenError, describe(error));
  }
  $("remind-send").disabled = false;
  refreshRoutines();
});

// ---- adding and changing a routine ----

let editing = null; // the routine the form changes (its RoutineInfo), or null: a new one
let preview = null; // tarsd's word on the schedule in the field: {schedule, valid, runs, problem, hint}
let previewTimer = 0;
let previewAbort = null;

const field = (name) => $("routine-" + name);

// The form in the routine it changes, or above the list for a new one.
function placeForm(name) {
  const form = $("routine-form");
  const item = name ? [...$("routine-list").children].find((node) => node.dataset.name === name) : null;
  if (item) {
    item.classList.add("editing");
    item.append(form);
  } else {
    $("routine-list").before(form);
  }
}

function ticks(container, names, checked, describeName) {
  container.replaceChildren(
    ...names.map((name) => {
      const label = el("label", "tick");
      const box = el("input");
      box.type = "checkbox";
      box.value = name;
      box.checked = checked.includes(name);
      label.append(box, document.createTextNode(" " + (describeName ? describeName(name) : name)));
      return label;
    })
  );
}

const ticked = (container) => [...container.querySelectorAll("input:checked")].map((box) => box.value);

function showNoteField() {
  field("note-row").hidden = !ticked(field("deliver")).includes("note");
}

// Other servers' tools a run may use without asking: those offered now, and any the routine names already.
async function offerTools(chosen) {
  let offered = [];
  try {
    const reply = await json(await api("/tools"));
    offered = reply.servers.flatMap((server) => (server.tools || []).map((tool) => tool.name).filter(Boolean));
  } catch (error) {
    if (error.status === 401) return;
  }
  const names = [...new Set([...offered, ...chosen])].sort();
  ticks(field("tools"), names, chosen, (name) => (offered.includes(name) ? name : name + " (not offered now)"));
  field("tools-note").textContent = names.length ? "" : "No other server's tools are set up (docs/tools.md): the routine uses tars's own.";
}

function clearErrors() {
  for (const name of ["name", "schedule", "prompt"]) fieldError(field(name), field(name + "-error"), "");
  field("form-error").textContent = "";
}

function openForm(info) {
  editing = info;
  clearErrors();
  const form = $("routine-form");
  form.hidden = false;
  field("form-title").textContent = info ? `Change “${info.name}”` : "New routine";
  field("save").textContent = info ? "Save changes" : "Add routine";
  field("name").value = info ? info.name : "";
  field("name").disabled = Boolean(info); // a routine keeps its name (remove it and add it again to rename)
  field("schedule").value = info ? info.schedule : "";
  field("prompt").value = info ? info.prompt : "";
  // A built-in run has no prompt to change: the field would only make the routine one it cannot be.
  const builtIn = Boolean(info && info.review);
  for (const node of [field("prompt"), $("routine-prompt-label"), field("prompt-error")]) node.hidden = builtIn;
  field("built-in").hidden = !builtIn;
  field("built-in").textContent = builtIn ? builtInRun(info.review) : "";
  field("quiet").checked = Boolean(info && info.quiet);
  const targets = [...new Set([...BASE_TARGETS, ...messengers, ...(info ? info.deliver : [])])];
  ticks(field("deliver"), targets, info ? info.deliver : []);
  field("note").value = info ? info.note : "";
  showNoteField();
  offerTools(info ? info.tools : []);
  preview = null;
  field("preview").replaceChildren();
  for (const node of document.querySelectorAll(".routine.editing")) node.classList.remove("editing");
  placeForm(info ? info.name : "");
  if (info) checkSchedule();
  (info ? field("schedule") : field("name")).focus();
  form.scrollIntoView({ block: "nearest" });
}

function closeForm() {
  $("routine-form").hidden = true;
  $("routine-list").before($("routine-form"));
  for (const node of document.querySelectorAll(".routine.editing")) node.classList.remove("editing");
  editing = null;
  clearTimeout(previewTimer);
  if (previewAbort) previewAbort.abort();
}

function showPreview(reply) {
  const shown = field("preview");
  if (!reply.valid) {
    shown.replaceChildren();
    fieldError(field("schedule"), field("schedule-error"), reply.hint ? `${reply.problem} (${reply.hint})` : reply.problem);
    return;
  }
  fieldError(field("schedule"), field("schedule-error"), "");
  useTimeZone(reply.timezone);
  const zone = routinesTimeZone();
  const head = reply.runs.length === 1 && reply.kind === "once" ? "Runs once" : `Next ${plural(reply.runs.length, "run")}`;
  const list = el("ul", "preview-runs");
  list.append(...reply.runs.map((at) => el("li", "", when(at))));
  shown.replaceChildren(el("div", "preview-head", `${head}, in ${zone}:`), list);
}

// tarsd reads the schedule as saving would (nothing else on the page judges one): the answer
// for the text still in the field is shown, an older one dropped.
async function checkSchedule() {
  clearTimeout(previewTimer);
  if (previewAbort) previewAbort.abort();
  const text = field("schedule").value.trim();
  preview = null;
  if (!text) {
    field("preview").replaceChildren();
    fieldError(field("schedule"), field("schedule-error"), "");
    return null;
  }
  const abort = new AbortController();
  previewAbort = abort;
  const params = new URLSearchParams({ schedule: text, runs: String(PREVIEW_RUNS) });
  if (editing) params.set("name", editing.name);
  try {
    const reply = await json(await api("/schedule/preview?" + params.toString(), { signal: abort.signal }));
    if (abort.signal.aborted || field("schedule").value.trim() !== text) return null;
    preview = reply;
    showPreview(reply);
    return reply;
  } catch (error) {
    if (error.name !== "AbortError" && error.status !== 401) fieldError(field("schedule"), field("schedule-error"), describe(error));
    return null;
  }
}

function changes() {
  const chosen = {
    schedule: field("schedule").value.trim(),
    prompt: field("prompt").value.trim(),
    deliver: ticked(field("deliver")),
    tools: ticked(field("tools")),
    quiet: field("quiet").checked,
    note: ticked(field("deliver")).includes("note") ? field("note").value.trim() : "",
  };
  if (!editing) {
    const body = { name: field("name").value.trim(), schedule: chosen.schedule, prompt: chosen.prompt, quiet: chosen.quiet };
    if (chosen.deliver.length) body.deliver = chosen.deliver; // none ticked: [routines] deliver
    if (chosen.tools.length) body.tools = chosen.tools;
    if (chosen.note) body.note = chosen.note;
    return body;
  }
  // An edit sends only what changed: a default filled in for the list ([routines] deliver, its note) stays a default.
  const same = (a, b) => a.length === b.length && [...a].sort().join("\n") === [...b].sort().join("\n");
  const body = {};
  if (chosen.schedule !== editing.schedule) body.schedule = chosen.schedule;
  if (chosen.prompt !== editing.prompt) body.prompt = chosen.prompt;
  if (!same(chosen.deliver, editing.deliver)) body.deliver = chosen.deliver;
  if (!same(chosen.tools, editing.tools)) body.tools = chosen.tools;
  if (chosen.quiet !== Boolean(editing.quiet)) body.quiet = chosen.quiet;
  if (chosen.note && chosen.note !== editing.note) body.note = chosen.note;
  return body;
}

// The first field that cannot be sent as it is: its error shown under it, and the cursor put there.
async function firstProblem() {
  const missing = [
    ["name", "Give it a short name, e.g. morning-brief."],
    ["schedule", "Say when it runs: “30 7 * * 1-5” (07:30 on weekdays) or “every 2h”."],
    ["prompt", "Say what tars is asked at each run."],
  ].filter(([name]) => !(name === "prompt" && editing && editing.review));
  for (const [name, message] of missing) {
    if (!field(name).value.trim()) return [name, message];
  }
  const checked = preview && preview.schedule === field("schedule").value.trim().split(/\s+/).join(" ") ? preview : await checkSchedule();
  if (checked && !checked.valid) return ["schedule", ""]; // its error is shown already
  return null;
}

$("routine-schedule").addEventListener("input", () => {
  // What was said of the text before is not said of this one: "checking…" until tarsd answers.
  preview = null;
  field("preview").replaceChildren(el("div", "preview-head", "checking…"));
  clearTimeout(previewTimer);
  previewTimer = setTimeout(checkSchedule, PREVIEW_DELAY_MS);
});
$("routine-deliver").addEventListener("change", showNoteField);
$("routine-cancel").addEventListener("click", closeForm);
$("routine-new").addEventListener("click", () => openForm(null));

$("routine-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  clearErrors();
  const problem = await firstProblem();
  if (problem) {
    const [name, message] = problem;
    if (message) fieldError(field(name), field(name + "-error"), message);
    field(name).focus();
    field(name + "-error").scrollIntoView({ block: "nearest" });
    return;
  }
  const body = changes();
  if (editing && !Object.keys(body).length) return closeForm(); // nothing changed
  field("save").disabled = true;
  try {
    const saved = editing
      ? await send("/routines/" + encodeURIComponent(editing.name), "PATCH", body)
      : await send("/routines", "POST", body);
    closeForm();
    const next = saved.routine.next_run ? `: next run ${when(saved.routine.next_run)}` : "";
    $("routines-saved").textContent = `${saved.status === "added" ? "Added" : "Saved"} “${saved.routine.name}”${next}.`;
  } catch (error) {
    // tarsd's own words (a name taken, a schedule it will not run), beside the button just pressed.
    if (error.status !== 401) {
      field("form-error").textContent = describe(error);
      field("form-error").scrollIntoView({ block: "nearest" });
    }
  }
  field("save").disabled = false;
  refreshRoutines();
});
