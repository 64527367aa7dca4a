// What every part of the tars web page uses: elements made with text only, the calls to tarsd's
// API with the token, errors for people, and times said the way tarsctl says them.
// Text from tarsd (notes, answers, errors) is only ever put on the page as text nodes: never as HTML.

export const $ = (id) => document.getElementById(id);

// An element with a class and text; text is always a text node.
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function button(label, onClick) {
  const node = el("button", "", label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

export const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;

export class ApiError extends Error {
  constructor(body, status) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.hint = (body && body.hint) || "";
    this.status = status;
  }
}

export function describe(error) {
  return error.hint ? `${error.message} (${error.hint})` : error.message || String(error);
}

// ---- the token, and the API's calls ----

let token = "";
let signedOut = () => {};

export function useToken(value) {
  token = value;
}

// What the page does when tarsd refuses the token (app.js shows the token form).
export function onSignedOut(handler) {
  signedOut = handler;
}

export async function api(path, options = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + token }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
  if (response.status === 401) {
    signedOut("tarsd refused the token: paste the one that “tarsctl http token” prints.");
    throw new ApiError({ message: "the token was refused" }, 401);
  }
  return response;
}

export async function json(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) throw new ApiError(body, response.status);
  return body;
}

// A JSON body sent with a method: the reply's JSON, or an ApiError.
export async function send(path, method, body) {
  return json(await api(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }));
}

// ---- times: in the routines' time zone, 24-hour as tarsctl prints them ----

const LANGUAGE = navigator.language || "en";
let timeZone = ""; // the routines' time zone, as tarsd reports it; "" until known: the browser's

export function useTimeZone(zone) {
  timeZone = zone || "";
}

export const routinesTimeZone = () => timeZone;

// 24-hour, as tarsctl prints times, unless the browser's language asks for another hour cycle
// itself (a locale such as en-US-u-hc-h12): a language's habit alone (en-US's 12-hour) does not.
function hourCycle() {
  try {
    return new Intl.Locale(LANGUAGE).hourCycle || "h23";
  } catch (_) {
    return "h23";
  }
}
const HOUR_CYCLE = hourCycle();

function formatted(date, options) {
  try {
    return new Intl.DateTimeFormat(LANGUAGE, Object.assign({ timeZone: timeZone || undefined }, options)).format(date);
  } catch (_) {
    return new Intl.DateTimeFormat(LANGUAGE, options).format(date); // a zone this browser does not know
  }
}

// A time, in the routines' time zone (their schedules are read in it), with the year when it is
// not this year's: "Fri, Nov 27, 15:00", "Wed, Mar 1, 2028, 09:00".
export function when(seconds) {
  if (!seconds) return "";
  const date = new Date(seconds * 1000);
  const options = { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hourCycle: HOUR_CYCLE };
  const year = (moment) => formatted(moment, { year: "numeric" });
  if (year(date) !== year(new Date())) options.year = "numeric";
  return formatted(date, options);
}

// ---- errors shown where the user is looking: next to the field, scrolled into view ----

// ``message`` under ``field`` (in ``where``, the field's error line); "" clears it.
export function fieldError(field, where, message) {
  where.textContent = message;
  if (message) {
    field.setAttribute("aria-invalid", "true");
    where.scrollIntoView({ block: "nearest" });
  } else {
    field.removeAttribute("aria-invalid");
  }
}
