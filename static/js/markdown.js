// @ts-check
// Markdown rendering (marked + DOMPurify + highlight.js), incremental so that streaming stays smooth.
import { Lexer, Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.js";
import hljs from "../vendor/highlight/highlight.min.js";
import { copyText, h, icon } from "./dom.js";
import { LEXER_OPTIONS, lexAside } from "./mdlex.js";

/** @typedef {import("./mdlex.js").MdToken} MdToken */
/** @typedef {import("./mdlex.js").LinkDef} LinkDef */
/** @typedef {import("./mdlex.js").TokenList} TokenList */

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
const FILENAME_LANGUAGES = { makefile: "makefile", gnumakefile: "makefile", ".bashrc": "bash" };
const HIGHLIGHT_LIMIT = 200_000;
const CACHE_LIMIT = 300;
const cache = new Map();
// show() renders a text up to this long at once; a longer one is lexed by a worker and rendered
// in slices, SLICE_BUDGET_MS of each animation frame at most, shared by all views doing so.
const SYNC_CHARS = 4_000;
const SLICE_BUDGET_MS = 6;

export function escapeHtml(text) {
  return String(text)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

/** The highlight.js language for a file path, or "" when none fits. */
export function languageForPath(path) {
  const name = String(path).split("/").pop().toLowerCase();
  if (FILENAME_LANGUAGES[name]) return FILENAME_LANGUAGES[name];
  const ext = name.includes(".") ? name.split(".").pop() : "";
  const language = EXTENSION_LANGUAGES[ext] ?? ext;
  return language && hljs.getLanguage(language) ? language : "";
}

/** Highlighted HTML for code (escaped plain text when the language is unknown); memoised. */
export function highlight(code, language) {
  const key = `${language}\u0000${code}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let html;
  if (language && hljs.getLanguage(language) && code.length <= HIGHLIGHT_LIMIT) {
    html = hljs.highlight(code, { language, ignoreIllegals: true }).value;
  } else {
    html = escapeHtml(code);
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value);
  cache.set(key, html);
  return html;
}

// Inline styles would be refused by the page's Content-Security-Policy, noisily, while parsing.
const STYLE_ATTRIBUTE = /\sstyle\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)/gi;

// The block still being streamed shows its code unhighlighted (highlighting a long code block
// again at every frame made long tasks); it is highlighted once closed.
const render = { live: false, plain: false }; // rendering that block; code was left plain
const PLAIN = "plain\u0000"; // before the key of a block shown with plain code
const PARTIAL = "partial\u0000"; // before the key of a list or table not all of whose parts show

const md = new Marked({
  ...LEXER_OPTIONS,
  renderer: {
    html({ text }) {
      return text.replace(STYLE_ATTRIBUTE, "");
    },
    code({ text, lang }) {
      const language = (lang ?? "").trim().split(/\s+/)[0].toLowerCase();
      const known = language && hljs.getLanguage(language) ? language : "";
      render.plain ||= Boolean(known && render.live);
      return (
        `<pre class="code-block" data-lang="${escapeHtml(language)}">` +
        `<code class="hljs${known ? ` language-${known}` : ""}">${render.live ? escapeHtml(text) : highlight(text, known)}</code></pre>`
      );
    },
  },
});

// Nothing in an answer may make the browser fetch on its own: an image URL can carry data out
// (`![x](https://host/?q=SECRET)`). Images other than inline data: ones become links to click.
const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "video", "audio", "source", "picture", "track", "iframe", "object", "embed", "form", "input"],
  FORBID_ATTR: ["style", "srcset", "poster", "background", "ping", "formaction"],
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") ?? "";
    if (!src.startsWith("data:image/")) {
      node.removeAttribute("src");
      node.setAttribute("data-remote-src", src);
    }
  }
});

/** A link in place of an image the page will not load by itself. */
function remoteImageLink(img) {
  const url = img.dataset.remoteSrc;
  const label = img.getAttribute("alt") || "image";
  let where = url;
  try {
    where = new URL(url, window.location.href).host || url;
  } catch {
    // not a URL: show it as it is
  }
  return h(
    "a",
    { class: "remote-image", href: url, target: "_blank", rel: "noopener noreferrer", title: `Open ${url}: images from other places are not loaded by themselves` },
    icon("image"),
    h("span", { text: `${label} (${where})` }),
  );
}

function decorateCodeBlocks(root) {
  for (const pre of root.querySelectorAll("pre.code-block")) {
    const bar = h(
      "div",
      { class: "code-bar" },
      h("span", { class: "code-lang", text: pre.dataset.lang || "text" }),
      h("button", { type: "button", class: "btn-ghost btn-xs copy-code", title: "Copy code" }, icon("copy"), "Copy"),
    );
    pre.prepend(bar);
  }
}

/** The nodes of HTML made entirely here: a code block's is its escaped text, or highlight.js's
 * spans around it, in a <pre> whose attributes are escaped. Sanitising it cost most of the time
 * of a long block. */
function madeHere(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

/** The element of a block; `live` for the block being streamed (see render). */
function renderToken(token, live) {
  Object.assign(render, { live, plain: false });
  let html;
  try {
    html = md.parser([token]);
  } finally {
    render.live = false;
  }
  const fragment = token.type === "code" ? madeHere(html) : DOMPurify.sanitize(html, PURIFY);
  for (const img of fragment.querySelectorAll("img[data-remote-src]")) img.replaceWith(remoteImageLink(img));
  const block = h("div", { class: "md-block" });
  block.append(fragment);
  decorateCodeBlocks(block);
  return block;
}

/** A block to show: its key, and its element made by renderToken. */
function tokenBlock(token, key, live) {
  const node = renderToken(token, live);
  return { key: render.plain ? PLAIN + key : key, node };
}

// A list or table being streamed is rendered part by part (items, rows), each part again only when
// it changed: a long one then costs what its last part does. The elements are renderToken's;
// holder(element) is where the parts go.
const PARTS = {
  list: { field: "items", holder: (node) => node.firstElementChild, part: (node) => node.querySelector("li") },
  table: {
    field: "rows",
    holder: (node) => node.querySelector("tbody") ?? node.firstElementChild.appendChild(document.createElement("tbody")),
    part: (node) => node.querySelector("tbody > tr"),
  },
};
// (Raw HTML could make a part parsed alone differ from the same part parsed with the others.)
const partwise = (token, key) => Object.hasOwn(PARTS, token.type) && !key.includes('"type":"html"');

/** The block of a list or table being streamed, made part by part (see PARTS) from `old`'s parts;
 * once past the deadline it leaves the parts still to render (one at least is) for later. */
function partsBlock(token, key, old, deadline) {
  const { field, holder, part } = PARTS[token.type];
  const parts = token[field];
  const shell = JSON.stringify({ ...token, raw: "", [field]: [] });
  const reuse = old?.shell === shell && old.parts.length <= parts.length;
  const block = reuse ? old : { shell, parts: [], node: renderToken({ ...token, [field]: [] }, true) };
  let rendered = 0;
  for (const [index, value] of parts.entries()) {
    const partKey = JSON.stringify(value);
    const shown = block.parts[index];
    if (shown?.key === partKey) continue;
    if (rendered && performance.now() >= deadline) return { ...block, key: PARTIAL + key, complete: false };
    const el = part(renderToken({ ...token, [field]: [value] }, true));
    if (shown) shown.el.replaceWith(el);
    else holder(block.node).append(el, "\n");
    block.parts[index] = { key: partKey, el, plain: render.plain };
    rendered += 1;
  }
  return { ...block, key: block.parts.some((shown) => shown.plain) ? PLAIN + key : key, complete: true };
}

// Line ends as marked sees them, so that token lengths add up to offsets in the text.
const normalise = (text) => (text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);
const rawLength = (tokens) => tokens.reduce((sum, token) => sum + token.raw.length, 0);

const visible = (token) => token.type !== "space" && token.type !== "def";

const keys = new WeakMap(); // token -> its JSON, for the tokens of a worker (which made it)
const keyOf = (token) => keys.get(token) ?? JSON.stringify(token);

const slices = []; // { step, done } of the views rendering in slices, in turn
let sliceFrame = 0;

/** Calls step(deadline) in animation frames until it returns false (it has nothing left to do). */
function inSlices(step) {
  return new Promise((done) => {
    slices.push({ step, done });
    sliceFrame ||= requestAnimationFrame(runSlices);
  });
}

function runSlices() {
  const deadline = performance.now() + SLICE_BUDGET_MS;
  try {
    while (slices.length && performance.now() < deadline) {
      let more = false;
      try {
        more = slices[0].step(deadline);
      } finally {
        if (!more) slices.shift().done(); // done, or failed: the others go on
      }
    }
  } finally {
    sliceFrame = slices.length ? requestAnimationFrame(runSlices) : 0;
  }
}

/**
 * Renders Markdown into a container, one element per top-level block.
 *
 * set(text) shows a whole text at once; show(text) too, without a long task when the text is long
 * (it resolves once all is shown). stream(text, budget) shows a text that grew since the
 * last call: it lexes only from the open (last) block on; the blocks before it are closed,
 * rendered once and kept. It spends about `budget` ms, rendering closed blocks in order and the
 * open one when none is left, and returns true while some are left (call it again next frame).
 * The open block shows its code unhighlighted, and a list or table in it is rendered part by
 * part (see render and PARTS).
 *
 * Marked decides where a block ends by looking at what follows, so in rare cases (a table whose
 * delimiter row turns out malformed) a closed block is not what lexing the whole text makes;
 * set() or show() on the complete text then makes the elements exactly those of a one-shot
 * render. A block is rendered again only when its token differs: the render of a token depends
 * on nothing else (reference links are resolved while lexing).
 */
export class MarkdownView {
  constructor(container) {
    this.el = container;
    this.shown = []; // { key: the token as JSON, node, and parts of PARTS } per block shown, in order
    this.rendered = 0; // shown blocks of closed tokens; the rest show the open part
    this.queue = []; // closed tokens not rendered yet
    this.openTokens = []; // the blocks from the open one on
    this.source = ""; // the text, line ends normalised as marked does
    this.closedEnd = 0; // where the open block starts in source
    this.links = Object.create(null); // the reference definitions of the text shown
    this.closedLinks = Object.create(null); // those before the open block
    this.generation = 0; // counts the calls of set, stream and show: a pending show() gives up
    this.el.classList.add("markdown");
    this.el.addEventListener("click", (event) => this.#onClick(event));
  }

  set(text) {
    this.generation += 1;
    const source = normalise(text);
    const tokens = /** @type {TokenList} */ (md.lexer(source));
    this.#adopt(source, tokens, tokens.links);
    this.#draw(Infinity);
  }

  async show(text) {
    if (text.length <= SYNC_CHARS) return void this.set(text);
    this.generation += 1;
    const run = this.generation;
    const source = normalise(text);
    const lexed = await lexAside(source);
    if (run !== this.generation) return;
    lexed.tokens.forEach((token, index) => keys.set(token, lexed.keys[index]));
    this.#adopt(source, lexed.tokens, lexed.links);
    let placed = false; // a container taken out of the page (another conversation shown) stops
    await inSlices((deadline) => {
      if (this.el.isConnected) placed = true;
      else if (placed) return false;
      return run === this.generation && this.#draw(deadline);
    });
  }

  stream(text, budget = Infinity) {
    this.generation += 1;
    const deadline = performance.now() + budget;
    const source = normalise(text);
    if (!source.startsWith(this.source.slice(0, this.closedEnd))) return void this.set(text);
    const lexer = new Lexer(md.defaults);
    const { links } = /** @type {TokenList} */ (lexer.tokens); // the lexer's, filled as it lexes
    Object.assign(links, this.closedLinks);
    const tokens = lexer.lex(source.slice(this.closedEnd));
    // A new (or growing) reference definition can change any block before it; so could a lexer
    // gone astray.
    const linksChanged = JSON.stringify(links) !== JSON.stringify(this.links);
    if (linksChanged || this.closedEnd + rawLength(tokens) !== source.length) return void this.set(text);
    this.source = source;
    this.links = { ...links };
    this.#split(tokens, this.closedEnd);
    return this.#draw(deadline, true);
  }

  /** Takes the tokens of a whole text: all to be shown again (or kept where they are the same).
   * @param {string} source
   * @param {MdToken[]} tokens
   * @param {Record<string, LinkDef>} links the reference definitions of the text */
  #adopt(source, tokens, links) {
    this.source = source;
    this.links = { ...links };
    this.closedLinks = Object.create(null);
    this.rendered = 0;
    this.queue = [];
    this.closedEnd = 0;
    this.#split(tokens, 0);
  }

  /** Queues the closed tokens of source[start:] and keeps the open ones; moves closedEnd. */
  #split(tokens, start) {
    const last = tokens.findLastIndex((token) => token.type !== "space");
    let at = start;
    this.openTokens = [];
    tokens.forEach((token, index) => {
      if (index === last) this.closedEnd = at;
      at += token.raw.length;
      if (visible(token)) (index < last ? this.queue : this.openTokens).push(token);
      else if (token.type === "def" && index < last) {
        this.closedLinks[token.tag] ??= { href: token.href, title: token.title };
      }
    });
  }

  /** Renders queued blocks (one at least) until the deadline, then the open ones if none is left;
   * whether some are left. */
  #draw(deadline, live = false) {
    const stale = this.shown.splice(this.rendered);
    while (this.queue.length) {
      this.#place(this.queue.shift(), stale, false, deadline);
      this.rendered += 1;
      if (performance.now() >= deadline) break;
    }
    let complete = true;
    if (this.queue.length) this.shown.push(...stale.splice(0)); // the old open part stays until its turn
    else for (const token of this.openTokens) complete = this.#place(token, stale, live, deadline) && complete;
    for (const block of stale) block.node.remove();
    return this.queue.length > 0 || !complete;
  }

  /** Shows a token in place of the first stale block (kept when it shows the same token, and
   * for a `live` one also when it shows it with plain code); false when it shows only part of it. */
  #place(token, stale, live, deadline) {
    const key = keyOf(token);
    const old = stale.shift();
    if (old?.key === key || (live && old?.key === PLAIN + key)) {
      this.shown.push(old);
      return true;
    }
    const block = live && partwise(token, key) ? partsBlock(token, key, old, deadline) : tokenBlock(token, key, live);
    if (!old) this.el.append(block.node);
    else if (old.node !== block.node) old.node.replaceWith(block.node);
    this.shown.push(block);
    return block.complete ?? true;
  }

  async #onClick(event) {
    const button = event.target.closest(".copy-code");
    if (!button) return;
    const code = button.closest("pre")?.querySelector("code")?.textContent ?? "";
    if (await copyText(code)) {
      button.classList.add("copied");
      setTimeout(() => button.classList.remove("copied"), 1200);
    }
  }
}
