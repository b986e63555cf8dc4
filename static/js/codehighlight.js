// @ts-check
// Code highlighted by highlight.js: the language of a file path, and the highlighted HTML (memoised).
import hljs from "../vendor/highlight/highlight.min.js";

/** @type {Record<string, string>} */
const EXTENSION_LANGUAGES = {
  py: "python", pyi: "python", js: "javascript", mjs: "javascript", cjs: "javascript",
  jsx: "javascript", ts: "typescript", tsx: "typescript", md: "markdown", markdown: "markdown",
  yml: "yaml", yaml: "yaml", sh: "bash", bash: "bash", zsh: "bash", json: "json",
  toml: "ini", ini: "ini", cfg: "ini", conf: "ini", html: "xml", htm: "xml", xml: "xml",
  svg: "xml", css: "css", scss: "scss", less: "less", rs: "rust", go: "go", java: "java",
  kt: "kotlin", c: "c", h: "c", cpp: "cpp", cc: "cpp", hpp: "cpp", cs: "csharp", rb: "ruby",
  php: "php", sql: "sql", swift: "swift", lua: "lua", r: "r", pl: "perl", diff: "diff",
  patch: "diff", mk: "makefile", graphql: "graphql", txt: "plaintext", log: "plaintext",
};
/** @type {Record<string, string>} */
const FILENAME_LANGUAGES = { makefile: "makefile", gnumakefile: "makefile", ".bashrc": "bash" };
const HIGHLIGHT_LIMIT = 200_000;
const CACHE_LIMIT = 300;
/** @type {Map<string, string>} */
const cache = new Map();

/** @param {unknown} text
 * @returns {string} the text with &, <, > and " escaped for HTML */
export function escapeHtml(text) {
  return String(text)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

/** The language a name says, when highlight.js knows it ("" otherwise).
 * @param {string} language */
export function knownLanguage(language) {
  return language && hljs.getLanguage(language) ? language : "";
}

/** The highlight.js language for a file path, or "" when none fits.
 * @param {string} path */
export function languageForPath(path) {
  const name = (String(path).split("/").pop() ?? "").toLowerCase();
  // Own keys only: a file named "constructor" is no language.
  if (Object.hasOwn(FILENAME_LANGUAGES, name)) return FILENAME_LANGUAGES[name];
  const ext = name.includes(".") ? name.split(".").pop() ?? "" : "";
  return knownLanguage(Object.hasOwn(EXTENSION_LANGUAGES, ext) ? EXTENSION_LANGUAGES[ext] : ext);
}

/** Highlighted HTML for code (escaped plain text when the language is unknown); memoised.
 * @param {string} code
 * @param {string} language */
export function highlight(code, language) {
  const key = `${language}\u0000${code}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let html;
  if (knownLanguage(language) && code.length <= HIGHLIGHT_LIMIT) {
    html = hljs.highlight(code, { language, ignoreIllegals: true }).value;
  } else {
    html = escapeHtml(code);
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value);
  cache.set(key, html);
  return html;
}
