// @ts-check
// The conversation list in the sidebar: search, rename in place, delete (after a confirmation), running dots.
import { choose } from "./dialog.js";
import { debounce, h, icon, relativeTime } from "./dom.js";
import { exportFormats, exportItem } from "./exportmenu.js";
import { markParts, markQuery, twinDetails } from "./listmarks.js";

/** @typedef {import("./requests.js").ConversationSummary} ConversationSummary */

export class ConversationList {
  /** root: the <ul>; search: the search <input>; onSelect(id); onTitle(title of the active one); onDeleted(id).
   * @param {HTMLElement} root
   * @param {{search: HTMLInputElement | null, request: import("./requests.js").Request, onSelect: (id: string) => void,
   *   onTitle: (title: string | null) => void, onDeleted: (id: string) => void}} parts */
  constructor(root, parts) {
    const { search } = parts;
    this.root = root;
    this.parts = parts;
    /** @type {ConversationSummary[]} */
    this.items = [];
    /** @type {Map<string, string | null>} every title seen, also of those a search now hides (the open one's stays in the header) */
    this.titles = new Map();
    /** @type {string | null} */
    this.active = null;
    /** @type {Set<string>} */
    this.running = new Set();
    this.query = "";
    /** @type {(() => void) | null} */
    this.closeMenu = null; // closes the open "⋯" menu of a row
    this.renaming = false; // a title is being edited in place: the list is drawn again once it closes
    this.refresh = debounce(() => this.#reload(), 200);
    search?.addEventListener("input", debounce(() => {
      this.query = search.value.trim();
      this.#reload();
    }, 250));
    search?.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || !search.value) return;
      event.stopPropagation();
      search.value = "";
      this.query = "";
      this.#reload();
    });
    setInterval(() => this.#updateTimes(), 60_000);
  }

  async #reload() {
    const query = this.query;
    const res = await this.parts.request("list_conversations", query ? { query } : {});
    if (!res.ok || query !== this.query) return;
    this.items = [...(res.conversations ?? [])].sort((a, b) =>
      String(b.updated_at ?? "").localeCompare(String(a.updated_at ?? "")));
    if (Array.isArray(res.running)) this.running = new Set(res.running);
    for (const item of this.items) this.titles.set(item.id, item.title ?? null);
    this.render();
  }

  titleOf(id) {
    return this.titles.get(id) || null;
  }

  render() {
    if (this.renaming) return;
    if (!this.items.length) {
      const text = this.query ? `Nothing matches “${this.query}”` : "No conversations yet";
      this.root.replaceChildren(h("li", { class: "empty-hint", text }));
      return;
    }
    const twins = twinDetails(this.items);
    this.root.replaceChildren(...this.items.map((item) => this.#row(item, twins.get(item.id))));
    if (this.active) this.parts.onTitle?.(this.titleOf(this.active));
  }

  /** twin: what tells it apart from the conversations of the same title (twinDetails). */
  #row(item, twin) {
    const title = item.title || "Untitled";
    const parts = Array.isArray(item.snippet_parts) && item.snippet_parts.length ? item.snippet_parts : null;
    const button = h(
      "button",
      { type: "button", class: "conv-item", "data-conversation-id": item.id, onclick: () => this.parts.onSelect(item.id) },
      h("span", { class: "conv-title", title: item.title || "" }, this.query ? markQuery(title, this.query) : title),
      twin ? h("span", { class: "conv-twin", "data-testid": "conversation-twin", text: twin }) : null,
      item.snippet ? h("span", { class: "conv-snippet", "data-testid": "conversation-snippet" }, parts ? markParts(parts) : item.snippet) : null,
      h("span", { class: "conv-meta" },
        h("span", { class: "conv-running", title: "Task running", hidden: !this.running.has(item.id) }),
        h("time", { class: "conv-time", datetime: item.updated_at ?? "", text: relativeTime(item.updated_at) })),
    );
    if (item.id === this.active) button.setAttribute("aria-current", "true");
    const actions = h("span", { class: "conv-actions" },
      h("button", { type: "button", class: "btn-ghost btn-icon", "data-testid": "rename-conversation", "aria-label": "Rename", title: "Rename", onclick: () => this.#startRename(item, li) }, icon("edit")),
      h("button", { type: "button", class: "btn-ghost btn-icon", "data-testid": "export-conversation", "aria-label": "Export", title: "Export as Markdown or JSON", onclick: () => this.#openMenu(item, li, more, true) }, icon("down")),
      h("button", { type: "button", class: "btn-ghost btn-icon", "data-testid": "delete-conversation", "aria-label": "Delete", title: "Delete", onclick: () => this.#delete(item) }, icon("close")));
    // On a touch screen nothing hovers: a "⋯" button opens the same actions as a menu.
    const more = h("button", {
      type: "button", class: "btn-ghost btn-icon conv-more", "data-testid": "conversation-menu", "aria-haspopup": "menu",
      "aria-expanded": "false", "aria-label": `Rename, export or delete “${item.title || "Untitled"}”`, title: "Rename, export or delete",
      onclick: () => this.#openMenu(item, li, more),
    }, "⋯");
    const li = h("li", { class: "conv-row" }, button, actions, more);
    return li;
  }

  /** The row's actions as a menu under its "⋯" button (`exporting`: only the export's formats, for the
   * export button beside rename and delete); a tap elsewhere or Esc closes it. */
  #openMenu(item, li, more, exporting = false) {
    const open = li.querySelector(".conv-menu");
    this.closeMenu?.();
    if (open) return;
    const choose = (action) => {
      this.closeMenu?.();
      action();
    };
    const closed = () => this.closeMenu?.();
    const menu = h("div", { class: "conv-menu", role: "menu", "data-testid": "conversation-actions" }, ...(exporting ? exportFormats(item.id, closed) : [
      h("button", { type: "button", role: "menuitem", "data-testid": "menu-rename", onclick: () => choose(() => this.#startRename(item, li)) }, icon("edit"), "Rename"),
      exportItem(item.id, () => menu, closed),
      h("button", { type: "button", role: "menuitem", class: "danger", "data-testid": "menu-delete", onclick: () => choose(() => this.#delete(item)) }, icon("close"), "Delete")]));
    const outside = (/** @type {Event} */ event) => {
      if (!li.contains(/** @type {Node} */ (event.target))) this.closeMenu?.();
    };
    const escape = (/** @type {KeyboardEvent} */ event) => {
      if (event.key !== "Escape") return;
      event.stopPropagation();
      this.closeMenu?.();
      more.focus();
    };
    this.closeMenu = () => {
      menu.remove();
      more.setAttribute("aria-expanded", "false");
      document.removeEventListener("pointerdown", outside, true);
      document.removeEventListener("keydown", escape, true);
      this.closeMenu = null;
    };
    document.addEventListener("pointerdown", outside, true);
    document.addEventListener("keydown", escape, true);
    li.append(menu);
    more.setAttribute("aria-expanded", "true");
    /** @type {HTMLElement} */ (menu.firstElementChild).focus();
  }

  #startRename(item, li) {
    const input = h("input", { type: "text", class: "conv-rename", "data-testid": "rename-input", "aria-label": "New title", maxlength: 200 });
    input.value = item.title ?? "";
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== item.title) {
        const ack = await this.parts.request("rename_conversation", { conversation_id: item.id, title });
        if (ack.ok) this.setTitle(item.id, ack.title);
      }
      this.renaming = false;
      this.render();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") finish(true);
      else if (event.key === "Escape") {
        event.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
    this.renaming = true;
    li.replaceChildren(input);
    input.focus();
    input.select();
  }

  async #delete(item) {
    const running = this.running.has(item.id);
    const answer = await choose({
      title: `Delete “${item.title || "Untitled"}”?`,
      body: [h("p", { text: running
        ? "A task is running in it: stop it first."
        : "Its messages and its undo history are removed for good. The files in the workspace stay as they are." })],
      choices: running ? [] : [{ label: "Delete", value: "delete", kind: "danger" }],
      testid: "delete-dialog",
      cancelLabel: running ? "Close" : "Cancel",
    });
    if (answer !== "delete") return;
    const ack = await this.parts.request("delete_conversation", { conversation_id: item.id });
    if (!ack.ok) {
      await choose({ title: "Could not delete it", body: [h("p", { text: ack.error?.message ?? "unknown error" })], choices: [], testid: "delete-error", cancelLabel: "Close" });
      return;
    }
    this.remove(item.id);
  }

  /** A conversation is gone (deleted here or in another tab). */
  remove(id) {
    this.titles.delete(id);
    if (!this.items.some((item) => item.id === id)) return;
    this.items = this.items.filter((item) => item.id !== id);
    this.running.delete(id);
    this.render();
    this.parts.onDeleted?.(id);
  }

  /** @param {string} id
   * @param {string | null} title */
  setTitle(id, title) {
    this.titles.set(id, title);
    if (id === this.active) this.parts.onTitle?.(title);
    const item = this.items.find((entry) => entry.id === id);
    if (!item) return void this.refresh();
    item.title = title;
    const el = /** @type {HTMLElement | null} */ (this.root.querySelector(`.conv-item[data-conversation-id="${CSS.escape(id)}"] .conv-title`));
    if (el) {
      el.textContent = title || "Untitled";
      el.title = title || "";
    }
  }

  /** @param {string | null} id */
  setActive(id) {
    this.active = id;
    for (const button of /** @type {NodeListOf<HTMLElement>} */ (this.root.querySelectorAll(".conv-item"))) {
      if (button.dataset.conversationId === id) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  /** @param {string} id
   * @param {boolean} running */
  setRunning(id, running) {
    if (running) this.running.add(id);
    else this.running.delete(id);
    const dot = /** @type {HTMLElement | null} */ (this.root.querySelector(`.conv-item[data-conversation-id="${CSS.escape(id)}"] .conv-running`));
    if (dot) dot.hidden = !running;
    else if (running) this.refresh(); // a conversation this list does not show yet
  }

  #updateTimes() {
    for (const time of /** @type {NodeListOf<HTMLTimeElement>} */ (this.root.querySelectorAll("time.conv-time"))) time.textContent = relativeTime(time.dateTime);
  }
}
