// @ts-check
// The message elements of a conversation: user bubbles (edit, branches) and streaming assistant answers.
import { copyText, formatBytes, h, icon } from "./dom.js";
import { MarkdownView } from "./markdown.js";
import { openPath } from "./preview.js";
import { attachmentPicture } from "./thumbnail.js";

// Rendering a streamed answer takes about this long per frame at most, so the page stays
// responsive; more while it is behind the text received, to catch up without a long task.
const FRAME_BUDGET_MS = 6;
const CATCH_UP_BUDGET_MS = 10;

/** "‹ 2/3 ›" switcher between sibling messages; onGo(offset) moves by -1 or +1. */
function branchNav(position, total, onGo, disabled) {
  const prev = h("button", { type: "button", class: "btn-ghost btn-icon", "aria-label": "Previous branch", disabled: disabled || position <= 1, onclick: () => onGo(-1) }, icon("left"));
  const next = h("button", { type: "button", class: "btn-ghost btn-icon", "aria-label": "Next branch", disabled: disabled || position >= total, onclick: () => onGo(1) }, icon("right"));
  return h("div", { class: "branch-nav", role: "group", "aria-label": "Branches" }, prev, h("span", { class: "branch-count", text: `${position}/${total}` }), next);
}

/** Shared by user and assistant messages: record id, parent and branch switcher. */
class MessageBase {
  constructor() {
    // Made by each kind of message (declared here for the type checker).
    /** @type {HTMLElement} */
    this.el;
    /** @type {HTMLElement} where the branch switcher goes */
    this.navSlot;
  }

  get messageId() {
    return this.el.dataset.messageId ?? null;
  }

  setRecord(record) {
    this.record = record;
    this.el.dataset.messageId = record.id;
    if (record.parent_id) this.el.dataset.parentId = record.parent_id;
    else delete this.el.dataset.parentId;
  }

  /** Show the branch switcher when the message has siblings; siblings are records, oldest first. */
  setSiblings(siblings, onSwitch, disabled = false) {
    this.nav?.remove();
    this.nav = null;
    if (!this.record || siblings.length < 2) return;
    const position = siblings.findIndex((s) => s.id === this.record.id) + 1;
    const go = (offset) => onSwitch(siblings[position - 1 + offset].id);
    this.nav = branchNav(position, siblings.length, go, disabled);
    this.navSlot.append(this.nav);
  }
}

export class UserMessage extends MessageBase {
  /** onEdit(message, newText) is called when an edit is submitted.
   * @param {string} text
   * @param {{onEdit?: (message: UserMessage, text: string) => void}} [hooks] */
  constructor(text, { onEdit } = {}) {
    super();
    this.text = text;
    this.onEdit = onEdit;
    this.bubble = h("div", { class: "bubble", text });
    this.editButton = h("button", { type: "button", class: "btn-ghost btn-icon edit-button", "aria-label": "Edit message", title: "Edit and resend as a new branch", hidden: true, onclick: () => this.startEdit() }, icon("edit"));
    this.navSlot = h("div", { class: "nav-slot" });
    this.actions = h("div", { class: "message-actions" }, this.navSlot, this.editButton);
    this.el = h("article", { class: "message user-message", "aria-label": "You" }, this.bubble, this.actions);
  }

  setRecord(record) {
    super.setRecord(record);
    this.editButton.hidden = !this.onEdit;
    this.setSkill(record.meta?.skill);
    this.setAttachments(record.meta?.attachments);
  }

  /** Chips naming the files sent with the message; a click previews one. */
  setAttachments(attachments) {
    this.files?.remove();
    this.files = attachments?.length ? h("ul", { class: "message-attachments", "data-testid": "message-attachments" },
      attachments.map((file) => h("li", {}, h(
        "button",
        { type: "button", class: "attachment-chip", "data-path": file.path, title: `${file.path}${file.note ? ` · ${file.note}` : ""}`, onclick: () => openPath(file.path) },
        attachmentPicture(file),
        h("span", { class: "attachment-name", text: file.name ?? file.path.split("/").pop() }),
        h("span", { class: "attachment-size", text: formatBytes(file.size) }),
      )))) : null;
    if (this.files) this.bubble.after(this.files);
  }

  /** A "skill: NAME" chip on a message sent with `/skill NAME`. */
  setSkill(skill) {
    this.chip?.remove();
    this.chip = skill ? h("span", { class: "skill-chip", "data-testid": "skill-chip", title: `Sent with the ${skill} skill`, text: `skill: ${skill}` }) : null;
    if (this.chip) this.el.prepend(this.chip);
  }

  setEditable(editable) {
    this.editButton.disabled = !editable;
  }

  setPending(pending) {
    this.el.classList.toggle("pending", pending);
  }

  startEdit() {
    if (this.editor) return;
    const area = h("textarea", { class: "edit-input", rows: 3, "aria-label": "Edit message" });
    area.value = this.text;
    const cancel = () => {
      this.editor.remove();
      this.editor = null;
      this.bubble.hidden = false;
      this.actions.hidden = false;
      this.editButton.focus();
    };
    const submit = () => {
      const text = area.value.trim();
      if (!text) return;
      cancel();
      this.onEdit?.(this, text);
    };
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        submit();
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        cancel();
      }
    });
    this.editor = h(
      "div",
      { class: "inline-editor" },
      area,
      h("div", { class: "inline-editor-actions" },
        h("span", { class: "hint", text: "Sends as a new branch from here" }),
        h("button", { type: "button", class: "btn btn-sm", onclick: cancel }, "Cancel"),
        h("button", { type: "button", class: "btn btn-primary btn-sm edit-send", onclick: submit }, "Send")),
    );
    this.bubble.hidden = true;
    this.actions.hidden = true;
    this.el.append(this.editor);
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  }
}

export class AssistantView extends MessageBase {
  get messageId() {
    return this.record?.id ?? this.streamedId; // asked for at every token: fields, not the dataset
  }

  constructor(messageId) {
    super();
    this.content = "";
    this.thinkingText = null;
    this.body = h("div", { class: "assistant-body" });
    this.cards = h("div", { class: "tool-cards" });
    this.navSlot = h("div", { class: "nav-slot" });
    this.#buildActions();
    this.el = h("article", { class: "message assistant-message", "aria-label": "Agent" }, this.navSlot, this.body, this.cards, this.actions);
    /** @type {number | null | undefined} */
    this.iteration; // the model turn it answers, set by lane.js (declared here for the type checker)
    this.streamedId = messageId ?? null;
    if (messageId) this.el.dataset.messageId = messageId;
    this.finished = false;
    this.whole = false; // shown whole from history (no stream to finish)
    this.frame = 0; // the requested animation frame, if any
    this.behind = false; // the last frame left blocks to render
    this.drawn = null; // the content when the last frame had rendered all of it
  }

  /** Copy (the answer's Markdown source) and Regenerate (the last answer only: setRegenerate). */
  #buildActions() {
    this.copyButton = h("button", {
      type: "button", class: "btn-ghost btn-sm", "data-testid": "copy-answer", title: "Copy the answer (Markdown)",
      onclick: async () => {
        const copied = await copyText(this.content);
        this.copyButton.textContent = copied ? "Copied" : "Could not copy";
        setTimeout(() => { this.copyButton.replaceChildren(icon("copy"), "Copy"); }, 1500);
      },
    }, icon("copy"), "Copy");
    this.regenerateButton = h("button", { type: "button", class: "btn-ghost btn-sm", "data-testid": "regenerate-answer", title: "Send the last message again, as a new branch", hidden: true }, icon("refresh"), "Regenerate");
    this.actions = h("div", { class: "answer-actions", hidden: true }, this.copyButton, this.regenerateButton);
  }

  /** Offer Regenerate on this answer (the last one shown, no task running), or not (null).
   * @param {(() => void) | null} regenerate */
  setRegenerate(regenerate) {
    this.regenerateButton.hidden = !regenerate;
    this.regenerateButton.onclick = regenerate;
    this.#showActions();
  }

  #showActions() {
    this.copyButton.hidden = !this.content;
    this.actions.hidden = !(this.finished || this.whole) || (this.copyButton.hidden && this.regenerateButton.hidden);
  }

  #schedule() {
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.#draw();
    });
  }

  /** One frame of the streamed answer; once it is finished and all drawn, the check that makes it
   * exactly a one-shot render of the whole text (in slices of frames when it is long). */
  #draw() {
    if (this.finished && this.drawn === this.content) return void this.markdown.show(this.content);
    this.behind = this.markdown.stream(this.content, this.behind ? CATCH_UP_BUDGET_MS : FRAME_BUDGET_MS);
    if (!this.behind) this.drawn = this.content;
    if (this.behind || this.finished) this.#schedule();
  }

  #thinkingBlock(open) {
    if (!this.thinking) {
      this.thinkingText = document.createTextNode("");
      this.thinkingLabel = h("span", { class: "thinking-label", text: "Thinking…" });
      this.thinking = h(
        "details",
        { class: "thinking-block", open },
        h("summary", {}, icon("chevron", "thinking-chevron"), this.thinkingLabel),
        h("div", { class: "thinking-text" }, this.thinkingText),
      );
      this.body.prepend(this.thinking);
    }
    return this.thinking;
  }

  #markdown() {
    if (!this.markdown) {
      const container = h("div", { class: "answer" });
      this.body.append(container);
      this.markdown = new MarkdownView(container);
    }
    return this.markdown;
  }

  setStreaming(streaming) {
    this.el.setAttribute("aria-busy", String(streaming));
    this.el.classList.toggle("streaming", streaming);
    if (this.thinking) this.thinking.classList.toggle("streaming", streaming && !this.content);
  }

  appendThinking(text) {
    const block = this.#thinkingBlock(true);
    block.classList.add("streaming");
    this.thinkingText.appendData(text ?? "");
  }

  appendToken(text) {
    if (!text) return;
    if (!this.content && this.thinking) {
      this.thinking.open = false;
      this.thinking.classList.remove("streaming");
      this.thinkingLabel.textContent = "Thought process";
    }
    this.#markdown();
    if (!this.el.classList.contains("typing")) this.el.classList.add("typing");
    this.content += text;
    this.#schedule();
  }

  /** History: the whole reasoning at once, collapsed. */
  setThinking(text) {
    if (!text) return;
    this.#thinkingBlock(false);
    this.thinkingText.data = text;
    this.thinkingLabel.textContent = "Thought process";
  }

  /** History: the whole answer (a long one is shown over a few frames). */
  setContent(text) {
    if (!text) return;
    this.content = text;
    this.whole = true; // history: the answer is all there
    this.#showActions();
    void this.#markdown().show(text);
  }

  addCard(card) {
    this.el.classList.remove("typing");
    this.cards.append(card.el);
  }

  finish() {
    this.finished = true;
    if (this.markdown) this.#schedule();
    if (this.thinking) {
      this.thinking.classList.remove("streaming");
      this.thinkingLabel.textContent = "Thought process";
    }
    this.el.classList.remove("typing");
    this.setStreaming(false);
    this.#showActions();
  }
}
