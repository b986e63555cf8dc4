// @ts-check
// What tells the conversation list's rows apart: the searched text marked in titles and snippets (built as text
// nodes and <mark> elements, never as HTML), and the start and task count of conversations with the same title.

/** @param {string} text
 * @param {boolean} matched */
function piece(text, matched) {
  if (!matched) return document.createTextNode(text);
  const mark = document.createElement("mark");
  mark.textContent = text;
  return mark;
}

/** A search answer's snippet_parts: the odd items are the matched text.
 * @param {string[]} parts */
export function markParts(parts) {
  const fragment = document.createDocumentFragment();
  parts.forEach((text, n) => { if (text) fragment.append(piece(text, n % 2 === 1)); });
  return fragment;
}

/** `text` with each occurrence of `query` marked, ignoring case (a title the search matched).
 * @param {string} text
 * @param {string} query */
export function markQuery(text, query) {
  const fragment = document.createDocumentFragment();
  const haystack = text.toLowerCase();
  const needle = query.toLowerCase();
  let from = 0;
  for (let at = needle ? haystack.indexOf(needle) : -1; at >= 0; at = haystack.indexOf(needle, from)) {
    if (at > from) fragment.append(piece(text.slice(from, at), false));
    fragment.append(piece(text.slice(at, at + needle.length), true));
    from = at + needle.length;
  }
  if (from < text.length) fragment.append(piece(text.slice(from), false));
  return fragment;
}

/** @param {string} iso
 * @param {boolean} seconds */
function started(iso, seconds) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const time = date.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", ...(seconds ? { second: "2-digit" } : {}) });
  if (date.toDateString() === new Date().toDateString()) return time;
  return `${date.toLocaleDateString(undefined, { month: "short", day: "numeric" })}, ${time}`;
}

/** For each conversation whose title another one in the list has too: "started 14:02 · 3 tasks" (with the seconds
 * when the minute is not enough). Rows with a title of their own get nothing.
 * @param {Array<{id: string, title?: string | null, created_at?: string, tasks?: number}>} items
 * @returns {Map<string, string>} */
export function twinDetails(items) {
  /** @type {Map<string, typeof items>} */
  const byTitle = new Map();
  for (const item of items) {
    const key = (item.title || "Untitled").trim().toLowerCase();
    byTitle.set(key, [...(byTitle.get(key) ?? []), item]);
  }
  const details = new Map();
  for (const twins of byTitle.values()) {
    if (twins.length < 2) continue;
    const minutes = twins.map((item) => started(item.created_at ?? "", false));
    const seconds = new Set(minutes).size < minutes.length;
    for (const item of twins) {
      const tasks = Number(item.tasks) || 0;
      const when = started(item.created_at ?? "", seconds);
      details.set(item.id, [when && `started ${when}`, `${tasks} task${tasks === 1 ? "" : "s"}`].filter(Boolean).join(" · "));
    }
  }
  return details;
}
