// The conversation pane: renders history paths and the live events of a task.
import { formatCount, h, icon } from "./dom.js";
import { pathTo, siblingsOf } from "./history.js";
import { AssistantView, UserMessage } from "./messages.js";
import { SafetyView } from "./safety.js";
import { ToolCard } from "./toolcard.js";

const EXAMPLES = [
  "Give me an overview of the files in this workspace",
  "Write a Python script that counts the lines of every file here",
  "Find TODO comments and list them with their locations",
];
const END_TEXT = {
  cancelled: "Stopped.",
  max_iterations: "Stopped: the agent reached its step limit for one task.",
  error: "The task ended with an error.",
};

function resultFromRecord(record) {
  const meta = record.meta ?? {};
  return { ok: meta.ok !== false, output: record.content ?? "", duration_ms: meta.duration_ms };
}

export class ChatView {
  /** handlers: onEdit(record, text), onSwitch(recordId), onApprove(callId, approved, always), onExample(text),
   * onApplyEdit(proposalId), onDiscardEdit(proposalId), onUndo(messageId). */
  constructor(root, scroller, handlers) {
    this.root = root;
    this.safety = new SafetyView(this, handlers);
    this.scroller = scroller;
    this.handlers = handlers;
    this.views = [];
    this.cards = new Map();
    this.live = null;
    this.atBottom = true;
    this.editable = true;
    let lastTop = 0;
    scroller.addEventListener("scroll", () => {
      // Only the reader scrolling up unsticks the view; content growing under a programmatic scroll must not.
      const near = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
      if (near) this.atBottom = true;
      else if (scroller.scrollTop < lastTop) this.atBottom = false;
      lastTop = scroller.scrollTop;
      this.onScrollState?.(this.atBottom);
    }, { passive: true });
    new ResizeObserver(() => {
      if (this.atBottom) scroller.scrollTop = scroller.scrollHeight;
    }).observe(root);
  }

  scrollToBottom() {
    this.atBottom = true;
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  reset() {
    this.iteration = null;
    this.root.replaceChildren();
    this.views = [];
    this.cards.clear();
    this.live = null;
    this.setBusy(false);
  }

  showWelcome() {
    this.reset();
    const examples = EXAMPLES.map((text) =>
      h("button", { type: "button", class: "example", onclick: () => this.handlers.onExample(text) }, text));
    this.root.append(h(
      "section",
      { class: "welcome" },
      h("h2", { text: "What should we work on?" }),
      h("p", { text: "The agent reads and changes files only inside this workspace. Ask it to explore, write code, run commands or fix things." }),
      h("div", { class: "examples" }, examples),
    ));
  }

  showLoading() {
    this.reset();
    this.root.append(h("div", { class: "loading" }, h("span", { class: "spinner" }), "Loading conversation…"));
  }

  showNotice(text, kind = "error") {
    const notice = h("div", { class: `inline-notice ${kind}`, role: kind === "error" ? "alert" : "status" }, icon("alert"), h("span", { text }));
    this.root.append(notice);
    return notice;
  }

  setBusy(busy) {
    this.root.setAttribute("aria-busy", String(busy));
    if (!busy) this.#clearPending();
  }

  setEditable(editable) {
    this.editable = editable;
  }

  /** Render the path from the root to leafId; while a task runs, the newest answer's calls without
   * a result are still under way (their events follow), not interrupted. */
  renderHistory(index, leafId, { running = false } = {}) {
    this.reset();
    const path = pathTo(index, leafId);
    const newest = path.findLast((record) => record.role === "assistant");
    for (const record of path) {
      if (record.role === "user") this.#appendUser(record.content ?? "", record);
      else if (record.role === "assistant") this.#appendAssistantRecord(index, record, running && record === newest);
    }
    this.decorate(index);
    this.safety.place();
    this.scrollToBottom();
  }

  #appendUser(text, record) {
    const message = new UserMessage(text, { onEdit: (m, newText) => this.handlers.onEdit(m.record, newText) });
    if (record) message.setRecord(record);
    this.root.append(message.el);
    this.views.push(message);
    return message;
  }

  #appendAssistantRecord(index, record, underWay) {
    const view = new AssistantView(record.id);
    view.setRecord(record);
    view.setThinking(record.reasoning_content);
    view.setContent(record.content);
    for (const call of record.tool_calls ?? []) {
      const card = this.#newCard(call.id, call.function?.name, view);
      card.setArguments(call.function?.arguments ?? "");
      const result = index.toolResults.get(call.id);
      if (result) {
        card.setResult(resultFromRecord(result));
        this.safety.attachProposal(card, result.meta?.proposal, false);
      } else if (!underWay) card.interrupt("no result");
    }
    this.root.append(view.el);
    this.views.push(view);
  }

  /** Update ids, edit buttons and branch switchers from a fresh index. */
  decorate(index) {
    for (const view of this.views) {
      const id = view.record?.id ?? view.messageId;
      const record = id ? index.byId.get(id) : null;
      if (!record) continue;
      view.setRecord(record);
      view.setSiblings(siblingsOf(index, record), (target) => this.handlers.onSwitch(target), !this.editable);
      view.setEditable?.(this.editable);
    }
  }

  /** Remove a message and everything after it (before sending its edited text as a branch). */
  truncateFrom(record) {
    this.#removeFrom(this.views.findIndex((view) => view.record?.id === record.id));
  }

  #removeFrom(position) {
    if (position < 0) return;
    const anchor = position > 0 ? this.views[position - 1].el : null;
    while (this.root.lastChild && this.root.lastChild !== anchor) this.root.lastChild.remove();
    this.views.length = position;
    for (const [id, card] of this.cards) if (!card.el.isConnected) this.cards.delete(id);
    this.live = null;
    this.pending = null;
  }

  /** An optimistic user message, waiting for the server's ack. */
  addUserMessage(text) {
    this.root.querySelector(".welcome")?.remove();
    const message = this.#appendUser(text, null);
    message.setPending(true);
    this.#showPending();
    this.scrollToBottom();
    return message;
  }

  removeUserMessage(message) {
    message.el.remove();
    this.views = this.views.filter((view) => view !== message);
    this.#clearPending();
  }

  #showPending() {
    this.#clearPending();
    this.pending = h("div", { class: "assistant-pending", "aria-hidden": "true" }, h("span"), h("span"), h("span"));
    this.root.append(this.pending);
  }

  #clearPending() {
    this.pending?.remove();
    this.pending = null;
  }

  #liveView(messageId) {
    this.#clearPending();
    const current = this.live;
    if (current && (!messageId || current.messageId === messageId)) return current;
    current?.finish();
    const view = new AssistantView(messageId);
    view.iteration = this.iteration;
    view.setStreaming(true);
    this.root.append(view.el);
    this.views.push(view);
    this.live = view;
    return view;
  }

  onToken(payload) {
    this.#liveView(payload.message_id).appendToken(payload.text);
  }

  onThinking(payload) {
    this.#liveView(payload.message_id).appendThinking(payload.text);
  }

  #newCard(callId, name, view) {
    const card = new ToolCard({
      callId,
      name,
      onApprove: (approved, always) => this.handlers.onApprove(callId, approved, always),
    });
    view.addCard(card);
    this.cards.set(callId, card);
    return card;
  }

  onTool(payload) {
    let card = this.cards.get(payload.call_id);
    if (!card) {
      if (this.live && this.#isLaterTurn(this.live)) {
        this.live.finish();
        this.live = null;
      }
      card = this.#newCard(payload.call_id, payload.name, this.#liveView(null));
    }
    this.#clearPending();
    switch (payload.phase) {
      case "args": card.appendArgs(payload.delta); break;
      case "end": card.setArguments(payload.arguments); break;
      case "approval": card.showApproval(payload.preview, payload.warnings); break;
      case "output": card.appendOutput(payload.delta); break;
      case "result":
        card.setResult(payload);
        this.safety.attachProposal(card, payload.details?.proposal, true);
        break;
      default: break;
    }
  }

  /** A new call belongs to a later model turn than the live answer: by `status` iteration, else because
   * calls of one turn all start before any of them finishes. */
  #isLaterTurn(view) {
    if (Number.isInteger(this.iteration) && Number.isInteger(view.iteration)) return this.iteration > view.iteration;
    return [...view.cards.children].some((el) => el.dataset.state === "ok" || el.dataset.state === "failed");
  }

  onStatus(payload) {
    if (Number.isInteger(payload.iteration)) this.iteration = payload.iteration;
  }

  onError(payload) {
    this.#clearPending();
    this.showNotice(`${payload.message ?? "Error"}${payload.code ? ` (${payload.code})` : ""}`);
  }

  onDone(payload) {
    this.live?.finish();
    this.live = null;
    this.setBusy(false);
    const reason = payload.reason ?? "complete";
    for (const card of this.cards.values()) card.interrupt(reason === "cancelled" ? "cancelled" : "interrupted");
    const usage = payload.usage ?? {};
    const tokens = usage.prompt_tokens || usage.completion_tokens
      ? `${formatCount(usage.prompt_tokens)} in · ${formatCount(usage.completion_tokens)} out` : "";
    const text = END_TEXT[reason] ?? (reason === "complete" ? "" : `Ended: ${reason}`);
    this.root.append(h(
      "div",
      { class: `task-end reason-${reason}`, "data-reason": reason },
      text ? h("span", { class: "task-end-text", text }) : null,
      tokens ? h("span", { class: "task-usage", title: "Tokens used by this task", text: tokens }) : null,
    ));
    this.safety.taskEnded(this.cards.values());
  }
}
