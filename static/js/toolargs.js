// @ts-check
// A tool call's arguments as its card shows them: a line that sums the call up, and each argument by its key
// (code highlighted, paths as links, diffs coloured).
import { isDiff, renderDiff } from "./diffview.js";
import { h } from "./dom.js";
import { highlight, languageForPath } from "./codehighlight.js";
import { openPath } from "./preview.js";
import { CODE_LANGUAGES, PATH_KEYS, SUMMARY_KEYS, TEXT_KEYS } from "./tools.js";

const SUMMARY_CHARS = 120;
const INLINE_CHARS = 100;

/** A block of code, highlighted in `language` ("" or unknown: plain).
 * @param {string} text
 * @param {string} language */
export function codeBlock(text, language) {
  const code = h("code", { class: "hljs" });
  code.innerHTML = highlight(String(text), language);
  return h("pre", { class: "code-block compact" }, code);
}

/** The line that sums a call up (its path, command, query...), or "".
 * @param {unknown} args the parsed arguments */
export function argumentSummary(args) {
  if (!args || typeof args !== "object") return "";
  const named = /** @type {Record<string, unknown>} */ (args);
  if (named.old_path && named.new_path) return `${named.old_path} → ${named.new_path}`;
  for (const key of SUMMARY_KEYS) {
    const value = named[key];
    if (typeof value === "string" && value) return value.split("\n")[0].slice(0, SUMMARY_CHARS);
  }
  return "";
}

/** A link that opens a workspace path in the preview.
 * @param {string} path */
function pathLink(path) {
  return h("a", { href: "#", class: "arg-inline path-link", "data-path": path, title: `Open ${path}`, onclick: (/** @type {Event} */ event) => {
    event.preventDefault();
    openPath(path);
  } }, path);
}

/** @param {string} key
 * @param {unknown} value
 * @param {Record<string, unknown>} args the call's other arguments (a text's path says its language) */
function renderValue(key, value, args) {
  if (typeof value !== "string") return h("code", { class: "arg-inline" }, JSON.stringify(value));
  if (isDiff(value)) return renderDiff(value);
  if (Object.hasOwn(CODE_LANGUAGES, key)) return codeBlock(value, CODE_LANGUAGES[key]);
  if (PATH_KEYS.includes(key) && !value.includes("\n")) return pathLink(value);
  if (TEXT_KEYS.includes(key)) return codeBlock(value, languageForPath(String(args.path ?? "")));
  if (value.includes("\n") || value.length > INLINE_CHARS) return h("pre", { class: "arg-text" }, value);
  return h("code", { class: "arg-inline" }, value);
}

/** Pretty view of a tool call's parsed arguments, but for the keys in `omit` (shown elsewhere); null when
 * nothing is left to show.
 * @param {unknown} args the parsed arguments (the raw text when they are not valid JSON)
 * @param {string[]} [omit] */
export function renderArguments(args, omit = []) {
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return h("pre", { class: "arg-text" }, typeof args === "string" ? args : JSON.stringify(args, null, 2));
  }
  const named = /** @type {Record<string, unknown>} */ (args);
  const entries = Object.entries(named).filter(([key]) => !omit.includes(key));
  if (!entries.length) return null;
  const list = h("dl", { class: "tool-args-list" });
  for (const [key, value] of entries) {
    list.append(h("dt", { text: key }), h("dd", {}, renderValue(key, value, named)));
  }
  return list;
}
