// @ts-check
// Read-only file preview panel (GET /api/file), highlighted by extension.
import { debounce, formatBytes, h, icon } from "./dom.js";
import { highlight, languageForPath } from "./codehighlight.js";
import { MarkdownView } from "./markdown.js";

const MARKDOWN = /\.(md|markdown|mdx)$/i;
const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;
const SVG = /\.svg$/i;
const IMAGE_LIMIT_BYTES = 20 * 1024 * 1024; // what GET /api/download?view=image serves

/** Ask the page to preview a workspace file, at a line when given (tool cards, chips, search results). */
export function openPath(path, line = null) {
  document.dispatchEvent(new CustomEvent("workspace:open", { detail: { path, line } }));
}

// A relative path with an extension and a line number: `src/app.py:12` (or `:12:5`); never part of an
// absolute path or a URL.
const PATH_LINE = /(?<![\w./~:-])((?:[\w.-]+\/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,10}):(\d+)(?::\d+)?/g;
const MAX_LINKS = 500;

/** Text with each `path:line` turned into a link that opens the preview at that line. */
export function linkPaths(text) {
  const fragment = document.createDocumentFragment();
  let last = 0;
  let links = 0;
  for (const match of text.matchAll(PATH_LINE)) {
    if (++links > MAX_LINKS) break;
    const [whole, path, line] = match;
    fragment.append(text.slice(last, match.index), h("a", {
      href: "#", class: "path-link", "data-path": path, "data-line": line, title: `Open ${path} at line ${line}`,
      onclick: (event) => {
        event.preventDefault();
        openPath(path, Number(line));
      },
    }, whole));
    last = match.index + whole.length;
  }
  fragment.append(text.slice(last));
  return fragment;
}

/** Highlighted HTML cut into lines: the spans open at a line break are closed there and reopened on the next
 * line, so each line stands alone (and can wrap beside its number). */
function htmlLines(html) {
  const lines = [];
  const open = [];
  let line = "";
  for (const [part] of html.matchAll(/<span[^>]*>|<\/span>|\n|[^<\n]+/g)) {
    if (part === "\n") {
      lines.push(line + "</span>".repeat(open.length));
      line = open.join("");
      continue;
    }
    if (part.startsWith("<span")) open.push(part);
    else if (part === "</span>") open.pop();
    line += part;
  }
  lines.push(line + "</span>".repeat(open.length));
  return lines;
}

export class FilePreview {
  /** onClose() is called after the panel closes. */
  constructor(panel, { token, onClose }) {
    this.panel = panel;
    this.token = token;
    this.onClose = onClose;
    this.path = null;
    this.request = 0;
    this.title = panel.querySelector("[data-role=path]");
    this.meta = panel.querySelector("[data-role=meta]");
    this.body = panel.querySelector("[data-role=body]");
    this.toggle = panel.querySelector("[data-role=toggle]");
    this.download = panel.querySelector("[data-role=download]");
    this.rendered = true; // Markdown and SVG show rendered until their source is asked for
    this.toggle?.addEventListener("click", () => {
      this.rendered = !this.rendered;
      if (this.data) this.#render(this.data);
    });
    panel.querySelector("[data-role=close]").addEventListener("click", () => this.close());
    panel.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.stopPropagation();
        this.close();
      }
    });
    this.reload = debounce(() => this.path && this.open(this.path, { keepScroll: true }), 250);
  }

  get isOpen() {
    return !this.panel.hidden;
  }

  /** Show a file; `line` (1-based) shows its source scrolled to that line, marked. */
  async open(path, { keepScroll = false, line = null } = {}) {
    const request = ++this.request;
    if (line) this.rendered = false;
    if (this.download) this.download.href = `/api/download?path=${encodeURIComponent(path)}`;
    const scroll = keepScroll ? this.body.scrollTop : 0;
    this.path = path;
    this.panel.hidden = false;
    this.title.textContent = path;
    this.title.title = path;
    if (!keepScroll) {
      this.meta.textContent = "";
      this.body.replaceChildren(h("div", { class: "loading" }, h("span", { class: "spinner" }), "Loading…"));
    }
    let data;
    try {
      const headers = this.token ? { Authorization: `Bearer ${this.token}` } : {};
      const response = await fetch(`/api/file?path=${encodeURIComponent(path)}`, { headers, credentials: "same-origin" });
      data = await response.json().catch(() => ({ ok: false, error: { message: `HTTP ${response.status}` } }));
      if (!response.ok && data.ok !== false) data = { ok: false, error: { message: `HTTP ${response.status}` } };
    } catch (error) {
      data = { ok: false, error: { message: String(error?.message ?? error) } };
    }
    if (request !== this.request) return;
    this.#render(data);
    this.body.scrollTop = scroll;
    if (line) this.#showLine(line);
  }

  #showLine(line) {
    const row = this.body.querySelectorAll(".code-line")[line - 1];
    if (!row) return;
    row.classList.add("target-line");
    row.scrollIntoView({ block: "center" });
  }

  #render(data) {
    this.data = data;
    if (this.toggle) this.toggle.hidden = true;
    if (!data.ok) {
      const message = typeof data.error === "string" ? data.error : data.error?.message;
      this.meta.textContent = "";
      this.body.replaceChildren(h("div", { class: "preview-message error" }, icon("alert"), message ?? "Could not load the file."));
      return;
    }
    const parts = [formatBytes(data.size)];
    if (data.truncated) parts.push("truncated");
    this.meta.textContent = parts.join(" · ");
    const path = data.path ?? this.path ?? "";
    if (IMAGE.test(path)) {
      if (!SVG.test(path)) return void this.#showImage(path, data.size);
      this.#showToggle();
      if (this.rendered) return void this.#showImage(path, data.size);
    }
    if (data.binary) {
      this.body.replaceChildren(h("div", { class: "preview-message" }, icon("file"), "Binary file: no preview."));
      return;
    }
    const content = String(data.content ?? "");
    const notice = data.truncated ? h("div", { class: "preview-notice", text: "The file is longer than shown here." }) : null;
    if (MARKDOWN.test(path) && this.toggle) {
      this.#showToggle();
      if (this.rendered) {
        const page = h("div", { class: "markdown-preview", "data-testid": "markdown-preview" });
        new MarkdownView(page).set(content);
        this.body.replaceChildren(page, ...(notice ? [notice] : []));
        return;
      }
    }
    const text = content.endsWith("\n") ? content.slice(0, -1) : content;
    const code = h("code", { class: "hljs code-lines" });
    // Long lines wrap; each keeps its number beside its first row.
    code.innerHTML = htmlLines(highlight(text, languageForPath(data.path ?? this.path)))
      .map((line, i) => `<span class="code-line"><span class="ln" aria-hidden="true">${i + 1}</span><span class="lc">${line}</span></span>`)
      .join("");
    const view = h("div", { class: "code-view wrapped" }, h("pre", { class: "code" }, code));
    this.body.replaceChildren(view, ...(notice ? [notice] : []));
  }

  #showToggle() {
    if (!this.toggle) return;
    this.toggle.hidden = false;
    this.toggle.textContent = this.rendered ? "Source" : "Rendered";
    this.toggle.setAttribute("aria-pressed", String(!this.rendered));
  }

  /** An image, from the download route (an <img> only: an SVG's scripts never run); a click shows it at its own
   * size or fitted again. */
  #showImage(path, size) {
    if (size > IMAGE_LIMIT_BYTES) {
      this.body.replaceChildren(h("div", { class: "preview-message" }, icon("image"),
        `This image is over ${formatBytes(IMAGE_LIMIT_BYTES)}: download it to see it.`));
      return;
    }
    this.images = (this.images ?? 0) + 1; // a changed file is fetched again, not taken from the image cache
    const src = `/api/download?path=${encodeURIComponent(path)}&view=image&v=${this.images}`;
    const image = h("img", { class: "preview-image", src, alt: path, "data-testid": "preview-image", title: "Click: actual size / fit" });
    const frame = h("div", { class: "image-view fit" }, image);
    image.addEventListener("load", () => {
      this.meta.textContent = `${image.naturalWidth} × ${image.naturalHeight} px · ${formatBytes(size)}`;
    });
    image.addEventListener("error", () => {
      frame.replaceChildren(h("div", { class: "preview-message error", "data-testid": "preview-image-error" }, icon("alert"),
        "This image cannot be shown: its content is not a PNG, JPEG, GIF, WebP or SVG image the browser can draw."));
    });
    image.addEventListener("click", () => frame.classList.toggle("fit"));
    this.body.replaceChildren(frame);
  }

  /** A file_tree change touched the previewed file. */
  changed(path, event, destPath) {
    if (!this.isOpen || path !== this.path) return;
    if (event === "moved" && destPath) {
      this.open(destPath, { keepScroll: true });
    } else if (event === "deleted") {
      this.meta.textContent = "deleted";
      this.body.prepend(h("div", { class: "preview-notice", text: "This file was deleted." }));
    } else {
      this.reload();
    }
  }

  /** A folder holding the previewed file changed more than a file_tree event listed. */
  changedUnder(folder) {
    if (this.isOpen && this.path && (!folder || this.path.startsWith(`${folder}/`))) this.reload();
  }

  close() {
    this.request += 1;
    this.path = null;
    this.panel.hidden = true;
    this.onClose?.();
  }
}
