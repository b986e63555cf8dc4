// Markdown rendering (marked + DOMPurify + highlight.js), incremental so that streaming stays smooth.
import { Lexer, Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.js";
import hljs from "../vendor/highlight/highlight.min.js";
import { copyText, h, icon } from "./dom.js";

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

const md = new Marked({
  gfm: true,
  renderer: {
    html({ text }) {
      return text.replace(STYLE_ATTRIBUTE, "");
    },
    code({ text, lang }) {
      const language = (lang ?? "").trim().split(/\s+/)[0].toLowerCase();
      const known = language && hljs.getLanguage(language) ? language : "";
      return (
        `<pre class="code-block" data-lang="${escapeHtml(language)}">` +
        `<code class="hljs${known ? ` language-${known}` : ""}">${highlight(text, known)}</code></pre>`
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

function renderToken(token) {
  const fragment = DOMPurify.sanitize(md.parser([token]), PURIFY);
  for (const img of fragment.querySelectorAll("img[data-remote-src]")) img.replaceWith(remoteImageLink(img));
  const block = h("div", { class: "md-block" });
  block.append(fragment);
  decorateCodeBlocks(block);
  return block;
}

// Line ends as marked sees them, so that token lengths add up to offsets in the text.
const normalise = (text) => (text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);
const rawLength = (tokens) => tokens.reduce((sum, token) => sum + token.raw.length, 0);

const visible = (token) => token.type !== "space" && token.type !== "def";

/**
 * Renders Markdown into a container, one element per top-level block.
 *
 * set(text) shows a whole text at once. stream(text, budget) shows a text that grew since the
 * last call: it lexes only from the open (last) block on; the blocks before it are closed,
 * rendered once and kept. It spends about `budget` ms, rendering closed blocks in order and the
 * open one when none is left, and returns true while some are left (call it again next frame).
 *
 * Marked decides where a block ends by looking at what follows, so in rare cases (a table whose
 * delimiter row turns out malformed) a closed block is not what lexing the whole text makes;
 * set() on the complete text then makes the elements exactly those of a one-shot render. A
 * block is rendered again only when its token differs: the render of a token depends on
 * nothing else (reference links are resolved while lexing).
 */
export class MarkdownView {
  constructor(container) {
    this.el = container;
    this.shown = []; // { key: the token as JSON, node } per block on the page, in order
    this.rendered = 0; // shown blocks of closed tokens; the rest show the open part
    this.queue = []; // closed tokens not rendered yet
    this.openTokens = []; // the blocks from the open one on
    this.source = ""; // the text, line ends normalised as marked does
    this.closedEnd = 0; // where the open block starts in source
    this.links = Object.create(null); // the reference definitions of the text shown
    this.closedLinks = Object.create(null); // those before the open block
    this.el.classList.add("markdown");
    this.el.addEventListener("click", (event) => this.#onClick(event));
  }

  set(text) {
    this.source = normalise(text);
    const tokens = md.lexer(this.source);
    this.links = { ...tokens.links };
    this.closedLinks = Object.create(null);
    this.rendered = 0;
    this.queue = [];
    this.closedEnd = 0;
    this.#split(tokens, 0);
    this.#draw(Infinity);
  }

  stream(text, budget = Infinity) {
    const deadline = performance.now() + budget;
    const source = normalise(text);
    if (!source.startsWith(this.source.slice(0, this.closedEnd))) return void this.set(text);
    const lexer = new Lexer(md.defaults);
    Object.assign(lexer.tokens.links, this.closedLinks);
    const tokens = lexer.lex(source.slice(this.closedEnd));
    // A new (or growing) reference definition can change any block before it; so could a lexer
    // gone astray.
    const linksChanged = JSON.stringify(lexer.tokens.links) !== JSON.stringify(this.links);
    if (linksChanged || this.closedEnd + rawLength(tokens) !== source.length) return void this.set(text);
    this.source = source;
    this.links = { ...lexer.tokens.links };
    this.#split(tokens, this.closedEnd);
    return this.#draw(deadline);
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

  /** Renders queued blocks (one at least) until the deadline, then the open ones if none is left. */
  #draw(deadline) {
    const stale = this.shown.splice(this.rendered);
    while (this.queue.length) {
      this.#place(this.queue.shift(), stale);
      this.rendered += 1;
      if (performance.now() >= deadline) break;
    }
    if (this.queue.length) this.shown.push(...stale.splice(0)); // the old open part stays until its turn
    else for (const token of this.openTokens) this.#place(token, stale);
    for (const block of stale) block.node.remove();
    return this.queue.length > 0;
  }

  /** Shows a token in place of the first stale block (kept when it shows the same token). */
  #place(token, stale) {
    const key = JSON.stringify(token);
    const old = stale.shift();
    if (old?.key === key) {
      this.shown.push(old);
      return;
    }
    const node = renderToken(token);
    if (old) old.node.replaceWith(node);
    else this.el.append(node);
    this.shown.push({ key, node });
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
