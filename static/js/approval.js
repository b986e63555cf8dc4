// @ts-check
// A tool call waiting for the user: what it would do (its diff, its command or code, in full on request), what
// a reader could miss in it, and Approve / Reject / "always", by click or by key (Enter or Y, Esc or N) once the
// box has the focus. The card (toolcard.js) holds it.
import { isDiff, renderDiff } from "./diffview.js";
import { h, icon } from "./dom.js";
import { codeBlock } from "./toolargs.js";

/** @typedef {import("./tools.js").ToolKind} ToolKind */
/** @typedef {import("./requests.js").Ack} Ack */

const PREVIEW_LINES = 30;
const PREVIEW_SLACK = 5;
const KEY_GUARD_MS = 400; // keys typed for something else just before the box took the focus do not answer it
const TYPING_PAUSE_MS = 2000;

let lastTyped = -Infinity; // when a character was last typed into a text field (a sent message clears it)
document.addEventListener("keydown", (event) => {
  if (!(event.target instanceof HTMLTextAreaElement || event.target instanceof HTMLInputElement)) return;
  if (event.key === "Enter" && !event.shiftKey) lastTyped = -Infinity;
  else if (event.key.length === 1) lastTyped = performance.now();
}, { capture: true });

/** Whether the user is busy typing elsewhere (the box then waits to be clicked or tabbed to). */
function typingElsewhere() {
  const active = document.activeElement;
  const field = active instanceof HTMLTextAreaElement || (active instanceof HTMLInputElement && active.type !== "checkbox");
  return field && (Boolean(active.value.trim()) || performance.now() - lastTyped < TYPING_PAUSE_MS);
}

/** The whole preview when it is short; else its first lines and a button naming how many more
 * there are. Nothing sits out of sight in a scroll box.
 * @param {string} text
 * @param {(part: string) => HTMLElement} render */
function previewBlock(text, render) {
  const lines = text.split("\n");
  if (lines.length <= PREVIEW_LINES + PREVIEW_SLACK) return h("div", { class: "approval-preview" }, render(text));
  const more = h("button", { type: "button", class: "btn btn-sm approval-more", "data-testid": "approval-more" },
    `Show ${lines.length - PREVIEW_LINES} more lines`);
  const block = h("div", { class: "approval-preview" }, render(lines.slice(0, PREVIEW_LINES).join("\n")), more);
  more.addEventListener("click", () => block.replaceChildren(render(text)));
  return block;
}

/** What the box asks, and what it calls the call in its warnings, by what the call does.
 * @param {string} name the tool
 * @param {ToolKind} kind
 * @param {boolean} diff the preview is a diff */
function wording(name, kind, diff) {
  if (diff) return { question: "The agent wants to make this change. Allow it?", noun: "change" };
  if (kind.deletes) return { question: "The agent wants to delete this. Allow it?", noun: "file" };
  if (kind.runs) return { question: "The agent wants to run this. Allow it?", noun: "command" };
  return { question: `The agent wants to use ${name}. Allow it?`, noun: "command" };
}

/**
 * What the box does with a decision: send it to the server (an ack with ok false keeps the box open, saying
 * why), then tell the card the server has it.
 * @typedef {object} ApprovalHooks
 * @property {(approved: boolean, always: boolean) => Promise<Ack>} send
 * @property {(approved: boolean) => void} decided
 */

export class ApprovalBox {
  /** @param {{name: string, kind: ToolKind, preview?: string, warnings?: string[]}} call
   * @param {ApprovalHooks} hooks */
  constructor({ name, kind, preview, warnings }, hooks) {
    this.hooks = hooks;
    this.keysFrom = 0;
    this.always = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", class: "approval-always", "data-testid": "approve-always" }));
    this.error = h("p", { class: "approval-error", role: "alert", hidden: true });
    this.approve = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "btn btn-primary btn-sm approve-button", "data-testid": "approve" }, icon("check"), "Approve"));
    this.reject = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "btn btn-danger-outline btn-sm reject-button", "data-testid": "reject" }, icon("close"), "Reject"));
    const keys = h("span", { class: "approval-keys", "aria-hidden": "true" },
      h("kbd", { text: "Enter" }), " or ", h("kbd", { text: "Y" }), " approve · ", h("kbd", { text: "Esc" }), " or ", h("kbd", { text: "N" }), " reject");
    this.actions = h("div", { class: "approval-actions" }, this.approve, this.reject,
      h("label", { class: "approval-always-label" }, this.always, `Always allow ${name} in this conversation`), keys);
    const text = String(preview ?? "");
    const diff = isDiff(text);
    const { question, noun } = wording(name, kind, diff);
    const notes = (warnings ?? []).map((warning) => h("li", { text: `This ${noun} ${warning}.` }));
    const language = kind.runs?.language ?? "plaintext";
    this.el = h(
      "section",
      { class: "tool-approval", tabindex: "0", "data-testid": "approval", "aria-label": `Approval for ${name}: Enter or Y approves, Escape or N rejects` },
      h("p", { class: "approval-title" }, icon("alert"), question),
      notes.length ? h("ul", { class: "approval-warnings", role: "alert" }, notes) : null,
      previewBlock(text, (part) => (diff ? renderDiff(part) : codeBlock(part, language))),
      this.actions,
      this.error,
    );
    this.approve.addEventListener("click", () => this.#decide(true));
    this.reject.addEventListener("click", () => this.#decide(false));
    this.el.addEventListener("keydown", (event) => this.#onKey(event));
  }

  /** Take the focus, so that its keys answer it, unless the user is typing elsewhere. */
  focus() {
    if (typingElsewhere()) return;
    this.el.focus({ preventScroll: true });
    this.keysFrom = performance.now() + KEY_GUARD_MS;
  }

  /** The task ended before an answer: nothing can be decided any more. */
  close() {
    for (const control of this.el.querySelectorAll("button, input")) /** @type {HTMLButtonElement} */ (control).disabled = true;
    this.el.classList.add("decided");
  }

  /** @param {boolean} disabled */
  #setDisabled(disabled) {
    for (const control of [this.approve, this.reject, this.always]) control.disabled = disabled;
  }

  /** @param {boolean} approved */
  async #decide(approved) {
    this.#setDisabled(true);
    this.error.hidden = true;
    const always = this.always.checked;
    const ack = await this.hooks.send(approved, always);
    if (!ack.ok) {
      this.#setDisabled(false);
      this.error.textContent = `Could not send the decision: ${ack.error?.message ?? "unknown error"}`;
      this.error.hidden = false;
      return;
    }
    this.el.classList.add("decided");
    this.actions.replaceChildren(h("span", { class: `approval-decision ${approved ? "approved" : "rejected"}` },
      approved ? `Approved${always ? " (always for this tool)" : ""}` : "Rejected"));
    this.hooks.decided(approved);
    if (this.el.contains(document.activeElement)) this.el.dispatchEvent(new CustomEvent("approval-decided", { bubbles: true }));
  }

  /** @param {KeyboardEvent} event */
  #onKey(event) {
    if (this.el.classList.contains("decided") || this.approve.disabled || event.repeat) return;
    if (event.ctrlKey || event.metaKey || event.altKey || performance.now() < this.keysFrom) return;
    const key = event.key.toLowerCase();
    const onButton = event.target instanceof HTMLButtonElement;
    if ((key === "enter" && !onButton) || key === "y") {
      event.preventDefault();
      this.#decide(true);
    } else if (key === "escape" || key === "n") {
      event.preventDefault(); // Esc here answers the call; it does not stop the task
      this.#decide(false);
    }
  }
}
