// The conversation list in the sidebar.
import { debounce, h, relativeTime } from "./dom.js";

export class ConversationList {
  /** load() -> Promise of the list_conversations ack; onSelect(id). */
  constructor(root, { load, onSelect, onTitle }) {
    this.root = root;
    this.load = load;
    this.onSelect = onSelect;
    this.onTitle = onTitle;
    this.items = [];
    this.active = null;
    this.running = new Set();
    this.refresh = debounce(() => this.#reload(), 200);
    setInterval(() => this.#updateTimes(), 60_000);
  }

  async #reload() {
    let res;
    try {
      res = await this.load();
    } catch {
      return;
    }
    if (!res?.ok) return;
    this.items = [...(res.conversations ?? [])].sort((a, b) =>
      String(b.updated_at ?? "").localeCompare(String(a.updated_at ?? "")));
    this.render();
  }

  titleOf(id) {
    return this.items.find((item) => item.id === id)?.title || null;
  }

  render() {
    if (!this.items.length) {
      this.root.replaceChildren(h("li", { class: "empty-hint", text: "No conversations yet" }));
      return;
    }
    this.root.replaceChildren(...this.items.map((item) => {
      const button = h(
        "button",
        { type: "button", class: "conv-item", "data-conversation-id": item.id, onclick: () => this.onSelect(item.id) },
        h("span", { class: "conv-title", text: item.title || "Untitled" }),
        h("span", { class: "conv-meta" },
          h("span", { class: "conv-running", title: "Task running", hidden: !this.running.has(item.id) }),
          h("time", { class: "conv-time", datetime: item.updated_at ?? "", text: relativeTime(item.updated_at) })),
      );
      if (item.id === this.active) button.setAttribute("aria-current", "true");
      return h("li", {}, button);
    }));
    if (this.active) this.onTitle?.(this.titleOf(this.active));
  }

  setActive(id) {
    this.active = id;
    for (const button of this.root.querySelectorAll(".conv-item")) {
      if (button.dataset.conversationId === id) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  setRunning(id, running) {
    if (running) this.running.add(id);
    else this.running.delete(id);
    const dot = this.root.querySelector(`.conv-item[data-conversation-id="${CSS.escape(id)}"] .conv-running`);
    if (dot) dot.hidden = !running;
  }

  #updateTimes() {
    for (const time of this.root.querySelectorAll("time.conv-time")) time.textContent = relativeTime(time.dateTime);
  }
}
