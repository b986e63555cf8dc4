// Read-only file preview panel (GET /api/file), highlighted by extension.
import { debounce, formatBytes, h, icon } from "./dom.js";
import { highlight, languageForPath } from "./markdown.js";

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

  async open(path, { keepScroll = false } = {}) {
    const request = ++this.request;
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
  }

  #render(data) {
    if (!data.ok) {
      const message = typeof data.error === "string" ? data.error : data.error?.message;
      this.meta.textContent = "";
      this.body.replaceChildren(h("div", { class: "preview-message error" }, icon("alert"), message ?? "Could not load the file."));
      return;
    }
    const parts = [formatBytes(data.size)];
    if (data.truncated) parts.push("truncated");
    this.meta.textContent = parts.join(" · ");
    if (data.binary) {
      this.body.replaceChildren(h("div", { class: "preview-message" }, icon("file"), "Binary file: no preview."));
      return;
    }
    const content = String(data.content ?? "");
    const lines = content.endsWith("\n") ? content.slice(0, -1).split("\n") : content.split("\n");
    const code = h("code", { class: "hljs" });
    code.innerHTML = highlight(content, languageForPath(data.path ?? this.path));
    const gutter = h("pre", { class: "gutter", "aria-hidden": "true" }, lines.map((_, i) => i + 1).join("\n"));
    const view = h("div", { class: "code-view" }, gutter, h("pre", { class: "code" }, code));
    const notice = data.truncated ? h("div", { class: "preview-notice", text: "The file is longer than shown here." }) : null;
    this.body.replaceChildren(view, ...(notice ? [notice] : []));
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

  close() {
    this.request += 1;
    this.path = null;
    this.panel.hidden = true;
    this.onClose?.();
  }
}
