// @ts-check
// The memory the agent keeps across turns (the CLI's /memory): view and edit the main memory, shared by every
// conversation, and the open conversation's own, in a dialog.
import { h } from "./dom.js";

const SCOPES = [
  { scope: "main", title: "Main memory", hint: "Every conversation sees it." },
  { scope: "task", title: "This conversation's memory", hint: "Only this conversation sees it." },
];

export class MemoryPanel {
  /** button: what opens it; conversationId() -> the open one or null.
   * @param {HTMLElement} button
   * @param {{request: import("./requests.js").Request, conversationId: () => string | null}} parts */
  constructor(button, { request, conversationId }) {
    this.request = request;
    this.conversationId = conversationId;
    this.dialog = h("dialog", { class: "memory-panel", "data-testid": "memory-panel", "aria-labelledby": "memory-title" });
    this.sections = new Map(SCOPES.map((spec) => [spec.scope, this.#section(spec)]));
    this.dialog.append(
      h("header", { class: "memory-head" },
        h("h2", { id: "memory-title", text: "Memory" }),
        h("button", { type: "button", class: "btn", "data-testid": "memory-close", onclick: () => this.dialog.close() }, "Close")),
      h("p", { class: "memory-intro", text: "The agent reads these notes in every model call and may add to them. Edit them here." }),
      ...[...this.sections.values()].map((section) => section.el),
    );
    document.body.append(this.dialog);
    button.addEventListener("click", () => this.open());
  }

  #section({ scope, title, hint }) {
    const area = h("textarea", { class: "memory-text", rows: 8, "data-testid": `memory-${scope}`, "aria-label": title, spellcheck: "false" });
    const count = h("span", { class: "memory-count" });
    const state = h("span", { class: "memory-state", role: "status", "data-testid": `memory-${scope}-state` });
    const save = h("button", { type: "button", class: "btn btn-primary btn-sm", "data-testid": `memory-${scope}-save`, onclick: () => this.#save(scope) }, "Save");
    const el = h("section", { class: "memory-section", "data-scope": scope },
      h("h3", { text: title }), h("p", { class: "hint", text: hint }), area,
      h("div", { class: "memory-actions" }, count, state, save));
    area.addEventListener("input", () => {
      this.#count(scope);
      state.textContent = "Not saved";
      state.className = "memory-state";
    });
    return { el, area, count, state, save };
  }

  #count(scope) {
    const { area, count } = this.sections.get(scope);
    const over = this.limit && area.value.length > this.limit;
    count.textContent = this.limit ? `${area.value.length.toLocaleString()} / ${this.limit.toLocaleString()} characters` : "";
    count.classList.toggle("over", Boolean(over));
  }

  async open() {
    const cid = this.conversationId();
    this.cid = cid;
    const task = this.sections.get("task");
    task.el.hidden = !cid;
    for (const { area, state } of this.sections.values()) {
      area.value = "";
      area.disabled = true;
      state.textContent = "Loading…";
    }
    if (!this.dialog.open) this.dialog.showModal();
    const ack = await this.request("get_memory", cid ? { conversation_id: cid } : {});
    if (cid !== this.cid) return;
    this.limit = ack.limit ?? null;
    for (const [scope, { area, state }] of this.sections) {
      area.disabled = !ack.ok;
      area.value = ack.ok ? ack[scope] ?? "" : "";
      state.textContent = ack.ok ? "" : `Could not load: ${ack.error?.message ?? "unknown error"}`;
      this.#count(scope);
    }
    this.sections.get("main").area.focus();
  }

  async #save(scope) {
    const { area, state, save } = this.sections.get(scope);
    save.disabled = true;
    const payload = { scope, content: area.value };
    if (scope === "task") payload.conversation_id = this.cid;
    const ack = await this.request("set_memory", payload);
    save.disabled = false;
    if (!ack.ok) {
      state.textContent = ack.error?.message ?? "Could not save.";
      state.className = "memory-state error";
      return;
    }
    area.value = ack.content ?? area.value;
    state.textContent = "Saved";
    state.className = "memory-state ok";
    this.#count(scope);
  }
}
