// Markdown rendering (marked + DOMPurify + highlight.js), incremental so that streaming stays smooth.
import { Marked } from "../vendor/marked/marked.esm.js";
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

function renderTokens(tokens, links) {
  const list = [...tokens];
  list.links = links;
  const fragment = DOMPurify.sanitize(md.parser(list), PURIFY);
  for (const img of fragment.querySelectorAll("img[data-remote-src]")) img.replaceWith(remoteImageLink(img));
  const block = h("div", { class: "md-block" });
  block.append(fragment);
  decorateCodeBlocks(block);
  return block;
}

/** Renders Markdown into a container; set() re-renders only the blocks that changed. */
export class MarkdownView {
  constructor(container) {
    this.el = container;
    this.blocks = [];
    this.text = "";
    this.el.classList.add("markdown");
    this.el.addEventListener("click", (event) => this.#onClick(event));
  }

  set(text) {
    this.text = text;
    const tokens = md.lexer(text);
    const visible = tokens.filter((t) => t.type !== "space" && t.type !== "def");
    const hasLinks = Object.keys(tokens.links ?? {}).length > 0;
    let keep = 0;
    if (!hasLinks) {
      while (keep < this.blocks.length && keep < visible.length && this.blocks[keep].raw === visible[keep].raw) {
        keep += 1;
      }
    }
    for (const block of this.blocks.splice(keep)) block.node.remove();
    for (const token of visible.slice(keep)) {
      const node = renderTokens([token], tokens.links);
      this.el.append(node);
      this.blocks.push({ raw: token.raw, node });
    }
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
