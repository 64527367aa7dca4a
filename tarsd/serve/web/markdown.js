// The markdown subset of tars's answers as page elements, the same subset tars sends to Telegram
// (tarsd/channels/telegram_text.py): **bold**, *italic*, ~~struck~~, `code`, fenced code blocks,
// headings (as a bold line), "- " bullets, "> " quotes, rules, and links to http(s) addresses.
// Built from elements and text nodes only, never parsed as HTML: a "<script>" in an answer or a
// note shows as those characters. Anything else stays as written.

const FENCE = /^\s*(```|~~~)\s*([\w+#.-]*)/;
const HEADING = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/;
const BULLET = /^(\s*)[*+-]\s+/;
const QUOTE = /^\s{0,3}>\s?/;
const RULE = /^\s{0,3}([-*_])(?:\s*\1){2,}\s*$/;
const LINK_SCHEMES = ["http://", "https://", "mailto:"]; // an address of another kind is written out, not linked
const MARKED_LINE_CHARS = 20_000; // a line longer than this (no answer writes one) is shown as written

// Inline marks, looked for from each position on: the earliest wins, and at one position the first
// in this order (a code span's stars are its own text). Global, so a look-behind sees the whole line.
const INLINE = [
  ["code", /(`+)(.+?)\1/g],
  ["escaped", /\\([\\`*_~[\]()#+\-.!>|<&])/g],
  ["link", /!?\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g],
  ["autolink", /<((?:https?|mailto):[^>\s]+)>/g],
  ["strong", /(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g],
  ["em", /(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])/g],
  ["em", /(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])/g],
  ["s", /~~(?=\S)(.+?)(?<=\S)~~/g],
];

function linkable(url) {
  const lower = url.toLowerCase();
  return LINK_SCHEMES.some((scheme) => lower.startsWith(scheme));
}

function link(label, url, into) {
  if (!linkable(url)) {
    inline(label, into);
    into.append(` (${url})`);
    return;
  }
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.rel = "noopener noreferrer";
  anchor.target = "_blank";
  inline(label, anchor);
  into.append(anchor);
}

function wrapped(tag, text, into) {
  const node = document.createElement(tag);
  inline(text, node);
  into.append(node);
}

function mark(kind, match, into) {
  if (kind === "code") {
    const code = document.createElement("code");
    code.textContent = match[2];
    into.append(code);
  } else if (kind === "escaped") into.append(match[1]);
  else if (kind === "link") link(match[1].trim(), match[2], into);
  else if (kind === "autolink") link(match[1], match[1], into);
  else if (kind === "strong") wrapped("strong", match[2], into);
  else wrapped(kind, match[1], into); // em, s
}

// One line's inline marks, appended to ``into`` as elements and text nodes. Each pattern's next
// match is kept until the text before it is used up: a long line full of marks is read a few
// times over, not once per mark; a line past MARKED_LINE_CHARS is left as written.
function inline(text, into) {
  if (text.length > MARKED_LINE_CHARS) {
    into.append(text);
    return;
  }
  const found = INLINE.map(() => undefined); // undefined: not looked for yet; null: none left in the line
  let at = 0;
  while (at < text.length) {
    let best = null;
    INLINE.forEach(([kind, pattern], i) => {
      if (found[i] === undefined || (found[i] !== null && found[i].index < at)) {
        pattern.lastIndex = at;
        found[i] = pattern.exec(text);
      }
      const match = found[i];
      if (match && (!best || match.index < best.match.index)) best = { kind, match };
    });
    if (!best) break;
    if (best.match.index > at) into.append(text.slice(at, best.match.index));
    mark(best.kind, best.match, into);
    at = best.match.index + best.match[0].length;
  }
  if (at < text.length) into.append(text.slice(at));
}

// Paragraphs as lists of lines; a fenced code block is one block of its own (its first line the fence).
function blocks(text) {
  const found = [];
  let lines = [];
  let fence = "";
  for (const line of text.split("\n")) {
    const opened = FENCE.exec(line);
    if (fence) {
      lines.push(line);
      if (opened && opened[1] === fence && !line.trim().slice(3).trim()) {
        found.push(lines);
        [lines, fence] = [[], ""];
      }
    } else if (opened) {
      if (lines.length) found.push(lines);
      [lines, fence] = [[line], opened[1]];
    } else if (!line.trim()) {
      if (lines.length) found.push(lines);
      lines = [];
    } else {
      lines.push(line);
    }
  }
  if (lines.length) found.push(lines);
  return found;
}

function line(text, into) {
  if (RULE.test(text)) {
    into.append(document.createElement("hr"));
    return;
  }
  const heading = HEADING.exec(text);
  if (heading) {
    wrapped("strong", heading[1], into);
    return;
  }
  const bullet = BULLET.exec(text);
  if (bullet) {
    into.append(bullet[1] + "• ");
    inline(text.slice(bullet[0].length).trimEnd(), into);
    return;
  }
  inline(text.trimEnd(), into);
}

function lines(texts, into) {
  texts.forEach((text, i) => {
    if (i) into.append("\n");
    line(text, into);
  });
}

function block(texts) {
  const opened = FENCE.exec(texts[0]);
  if (opened) {
    const closed = texts.length > 1 && ["```", "~~~"].includes(texts[texts.length - 1].trim());
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    code.textContent = (closed ? texts.slice(1, -1) : texts.slice(1)).join("\n");
    pre.className = "md-code";
    pre.append(code);
    return pre;
  }
  if (texts.every((text) => QUOTE.test(text))) {
    const quote = document.createElement("blockquote");
    lines(
      texts.map((text) => text.replace(QUOTE, "")),
      quote
    );
    return quote;
  }
  const paragraph = document.createElement("div");
  paragraph.className = "md-p";
  lines(texts, paragraph);
  return paragraph;
}

// ``text`` (markdown) as a fragment of elements and text nodes.
export function markdown(text) {
  const fragment = document.createDocumentFragment();
  for (const texts of blocks(String(text).replace(/\r\n?/g, "\n"))) fragment.append(block(texts));
  return fragment;
}
