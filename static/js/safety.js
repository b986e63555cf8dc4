// @ts-check
// Safe execution in the conversation: Apply / Discard on proposed edits, "Undo this task" after tasks, and
// the tools the user allowed "always", each revocable.
import { h, icon } from "./dom.js";
import { ProposalBox } from "./proposal.js";
import { toolKind } from "./tools.js";

function follows(earlier, later) {
  return Boolean(earlier.compareDocumentPosition(later) & Node.DOCUMENT_POSITION_FOLLOWING);
}

function pathList(label, paths) {
  if (!paths?.length) return null;
  return h("span", { class: "undo-paths" }, `${label}: `, paths.map((path) => h("code", { text: path })));
}

/**
 * What an Undo row does: undo the task (the ack), ask first (null: cancelled; else the paths to overwrite),
 * say it was undone.
 * @typedef {object} UndoHooks
 * @property {(messageId: string, overwrite: string[]) => Promise<import("./requests.js").AckMap["undo_task"]>} undo
 * @property {((messageId: string) => Promise<{overwrite: string[]} | null>) | undefined} confirm
 * @property {() => void} undone
 */

/** The "Undo this task" button at the end of a task, and what it restored. */
class UndoRow {
  /** @param {string} messageId
   * @param {UndoHooks} hooks
   * @param {boolean} undone */
  constructor(messageId, hooks, undone) {
    this.messageId = messageId;
    this.hooks = hooks;
    this.button = h("button", { type: "button", class: "btn btn-sm undo-button", "data-testid": "undo-task", title: "Put back every file this task created, changed, renamed or deleted", onclick: () => this.#run() }, icon("undo"), "Undo this task");
    this.notice = h("div", { class: "undo-notice", role: "status", "data-testid": "undo-notice", hidden: true });
    this.el = h("div", { class: "task-undo", "data-message-id": messageId }, this.button, this.notice);
    if (undone) this.#setUndone();
  }

  #setUndone() {
    this.button.disabled = true;
    this.button.replaceChildren(icon("check"), "Undone");
  }

  async #run() {
    const chosen = this.hooks.confirm ? await this.hooks.confirm(this.messageId) : { overwrite: [] };
    if (!chosen) return;
    this.button.disabled = true;
    this.notice.hidden = true;
    const ack = await this.hooks.undo(this.messageId, chosen.overwrite);
    this.notice.hidden = false;
    if (!ack?.ok) {
      this.button.disabled = false;
      this.notice.className = "undo-notice error";
      this.notice.textContent = `Could not undo: ${ack?.error?.message ?? "unknown error"}`;
      return;
    }
    const conflicts = ack.conflicts ?? [];
    if (conflicts.length) this.button.disabled = false; // what it left can still be undone, overwriting
    else this.#setUndone();
    this.notice.className = "undo-notice";
    const removed = new Set(ack.removed ?? []); // made by the task: undoing removed them
    const restored = pathList("Restored", (ack.restored ?? []).filter((path) => !removed.has(path)));
    const gone = pathList("Removed", [...removed]);
    const skipped = pathList("Skipped", ack.skipped);
    const kept = pathList("Left as they are (changed since the task)", conflicts.map((conflict) => conflict.path));
    kept?.setAttribute("data-testid", "undo-kept");
    const parts = restored || gone || skipped || kept ? [gone, restored, skipped, kept] : [h("span", { text: ack.message || "Nothing to undo." })];
    this.notice.replaceChildren(...parts.filter(Boolean));
    if (!conflicts.length) this.hooks.undone();
  }
}

export class SafetyView {
  /** chat: the ChatView (root, views, editable: false while a task runs); handlers: onApplyEdit(id), onDiscardEdit(id),
   * onUndo(messageId, overwrite: [paths changed since the task to put back all the same]). */
  constructor(chat, handlers) {
    this.chat = chat;
    this.handlers = handlers;
    this.pendingEdits = null;
    this.outcomes = new Map();
    this.undoable = new Set();
    this.undone = new Set();
    this.changed = new WeakSet();
    this.ends = 0; // tasks seen ending: what an answer asked for before an end cannot know of it
    /** @type {Map<string, number>} user message id -> `ends` when its Undo was guessed */
    this.guessedAt = new Map();
  }

  /** Ids of the proposals still pending (list_edits); null when unknown. */
  setPendingEdits(ids) {
    this.pendingEdits = Array.isArray(ids) ? new Set(ids) : null;
  }

  /** User message ids whose task has something to undo (get_conversation's `undoable`). The server's word
   * replaces the guess made at a task's end: a task whose writes failed, or that put back what it changed,
   * is not listed, and its Undo (which would restore nothing) goes. Not so for a task that ended after the
   * answer was asked for (`asOf`: `ends` then), which the answer cannot know of yet.
   * @param {string[] | undefined} ids
   * @param {number} [asOf] */
  setUndoable(ids, asOf = this.ends) {
    if (!Array.isArray(ids)) return;
    this.undoable = new Set(ids);
    const newer = (/** @type {string} */ id) => (this.guessedAt.get(id) ?? 0) > asOf;
    this.changed = new WeakSet(this.#users().filter((view) => newer(view.messageId ?? "")));
    for (const row of this.chat.root.querySelectorAll(".task-undo")) {
      const id = /** @type {HTMLElement} */ (row).dataset.messageId ?? "";
      if (!this.undoable.has(id) && !this.undone.has(id) && !newer(id)) row.remove();
    }
    this.place();
  }

  /** Show a propose_edit result's diff with Apply / Discard (live: always pending). */
  attachProposal(card, proposal, live) {
    if (!proposal?.id) return;
    const { id } = proposal;
    const pending = live || !this.pendingEdits || this.pendingEdits.has(id);
    const box = new ProposalBox(proposal, this.outcomes.get(id) ?? (pending ? "pending" : "closed"), {
      apply: (pid) => this.handlers.onApplyEdit(pid),
      discard: (pid) => this.handlers.onDiscardEdit(pid),
    });
    box.onDecided = (outcome) => {
      this.outcomes.set(id, outcome);
      this.pendingEdits?.delete(id);
      if (outcome !== "applied") return;
      const user = this.#userBefore(card.el);
      if (user) this.changed.add(user);
      this.place();
    };
    card.attach(box.el, box.pending);
  }

  /** The last task ended: offer Undo when one of its calls changed files. */
  taskEnded(cards) {
    this.ends += 1;
    const user = this.#userBefore(null);
    if (!user) return;
    if (user.messageId) this.guessedAt.set(user.messageId, this.ends);
    for (const card of cards) {
      if (!card.el.isConnected || !follows(user.el, card.el)) continue;
      const applied = card.el.querySelector('.proposal[data-state="applied"]');
      if (applied || (toolKind(card.name).changesFiles && card.state === "ok")) this.changed.add(user);
    }
    this.place();
  }

  /** Put an Undo row at the end of every shown task that can be undone (not the one running). */
  place() {
    const users = this.#users();
    users.forEach((view, position) => {
      const id = view.messageId;
      const last = position === users.length - 1;
      if (!id || (last && !this.chat.editable)) return;
      if (!this.undoable.has(id) && !this.changed.has(view) && !this.undone.has(id)) return;
      if (this.chat.root.querySelector(`.task-undo[data-message-id="${CSS.escape(id)}"]`)) return;
      const row = new UndoRow(id, {
        undo: (mid, overwrite) => this.handlers.onUndo(mid, overwrite),
        confirm: this.handlers.confirmUndo, // lists what the undo will remove, restore and leave, and asks
        undone: () => this.undone.add(id),
      }, this.undone.has(id));
      this.chat.root.insertBefore(row.el, users[position + 1]?.el ?? null);
    });
  }

  /** The newest shown task's "Undo this task" button that can still be pressed (the command menu's /undo), or null.
   * @returns {HTMLButtonElement | null} */
  lastUndo() {
    return [...this.chat.root.querySelectorAll(".task-undo .undo-button:not(:disabled)")].at(-1) ?? null;
  }

  #users() {
    return this.chat.views.filter((view) => view.el.classList.contains("user-message"));
  }

  /** The user message whose task holds el (null: the last task). */
  #userBefore(el) {
    const users = this.#users();
    if (!el) return users.at(-1) ?? null;
    return users.findLast((view) => follows(view.el, el)) ?? null;
  }
}

/** The tools the user allowed "always" in the open conversation, next to the approval mode; each can be
 * revoked (the next call asks again). */
export class AlwaysAllowed {
  /** anchor: the element it follows; onRevoke(tool) -> Promise of the ack ({ok, always_allowed}). */
  constructor(anchor, onRevoke) {
    this.onRevoke = onRevoke;
    this.button = h("button", {
      type: "button", class: "btn-ghost allowed-button", "data-testid": "always-allowed", "aria-expanded": "false",
      "aria-controls": "allowed-popover", onclick: () => this.#setOpen(this.popover.hidden),
    });
    this.list = h("ul", { class: "allowed-list" });
    this.error = h("p", { class: "allowed-error", role: "alert", hidden: true });
    this.popover = h("div", { id: "allowed-popover", class: "allowed-popover", "data-testid": "allowed-popover", hidden: true },
      h("p", { text: "These tools run without asking in this conversation:" }), this.list, this.error);
    this.el = h("span", { class: "allowed-control", hidden: true }, this.button, this.popover);
    anchor.after(this.el);
    document.addEventListener("click", (event) => {
      if (!this.el.contains(event.target)) this.#setOpen(false);
    });
    this.el.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || this.popover.hidden) return;
      event.preventDefault();
      this.#setOpen(false);
      this.button.focus();
    });
    this.set([]);
  }

  set(names) {
    const tools = Array.isArray(names) ? names : [];
    this.el.hidden = !tools.length;
    this.button.textContent = `${tools.length} always allowed`;
    this.button.title = `Run without asking here: ${tools.join(", ")}`;
    this.list.replaceChildren(...tools.map((tool) => h("li", {}, h("code", { text: tool }),
      h("button", { type: "button", class: "btn btn-sm", "data-testid": "revoke", "data-tool": tool, onclick: () => this.#revoke(tool) },
        "Ask again"))));
    if (!tools.length) this.#setOpen(false);
  }

  #setOpen(open) {
    this.popover.hidden = !open;
    this.button.setAttribute("aria-expanded", String(open));
    if (open) this.error.hidden = true;
  }

  async #revoke(tool) {
    const ack = await this.onRevoke(tool);
    if (!ack?.ok) {
      this.error.textContent = `Could not change it: ${ack?.error?.message ?? "unknown error"}`;
      this.error.hidden = false;
      return;
    }
    this.set(ack.always_allowed);
    if (!this.el.hidden) this.list.querySelector("button")?.focus();
  }
}
