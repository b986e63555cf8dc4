// @ts-check
// The conversation pane: renders history paths and the live events of a task.
import { h, icon } from "./dom.js";
import { activeSummary, pathTo, siblingsOf, summaryOf } from "./history.js";
import { Lane } from "./lane.js";
import { AssistantView, UserMessage } from "./messages.js";
import { isPlanPrompt, PlanView, stepDivider } from "./plan.js";
import { latestPlans, resultFromRecord, summaryBlock, taskEndMarker } from "./records.js";
import { SafetyView } from "./safety.js";
import { ToolCard } from "./toolcard.js";

/** @typedef {import("./events.js").EventBase} EventBase */
/** @typedef {import("./events.js").TokenEvent} TokenEvent */
/** @typedef {import("./events.js").ThinkingEvent} ThinkingEvent */
/** @typedef {import("./events.js").ToolEvent} ToolEvent */
/** @typedef {import("./events.js").StatusEvent} StatusEvent */
/** @typedef {import("./events.js").PlanEvent} PlanEvent */
/** @typedef {import("./events.js").ContextEvent} ContextEvent */
/** @typedef {import("./events.js").ErrorEvent} ErrorEvent */
/** @typedef {import("./events.js").DoneEvent} DoneEvent */

const EXAMPLES = [
  "Give me an overview of the files in this workspace",
  "Write a Python script that counts the lines of every file here",
  "Find TODO comments and list them with their locations",
];
export class ChatView {
  /** handlers: onEdit(record, text), onSwitch(recordId), onApprove(callId, approved, always), onExample(text),
   * onApplyEdit(proposalId), onDiscardEdit(proposalId), onUndo(messageId, overwrite), onRegenerate() (the last
   * answer again, as a new branch). */
  constructor(root, scroller, handlers) {
    this.root = root;
    this.safety = new SafetyView(this, handlers);
    this.scroller = scroller;
    this.handlers = handlers;
    this.views = [];
    this.cards = new Map();
    this.lanes = new Map(); // a delegating call's id -> the sub-agent's lane inside its card
    this.top = this.#topLane();
    this.atBottom = true;
    this.examples = EXAMPLES;
    this.editable = true;
    /** @type {((atBottom: boolean) => void) | undefined} */
    this.onScrollState; // told whether the newest part is in view (stuck to the bottom, or nothing to scroll), set by the app
    let lastTop = 0;
    scroller.addEventListener("scroll", () => {
      // Only the reader scrolling up unsticks the view; content growing under a programmatic scroll must not.
      const near = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
      if (near) this.atBottom = true;
      else if (scroller.scrollTop < lastTop) this.atBottom = false;
      lastTop = scroller.scrollTop;
      this.#reportScroll();
    }, { passive: true });
    new ResizeObserver(() => {
      if (this.atBottom) scroller.scrollTop = scroller.scrollHeight;
      this.#reportScroll();
    }).observe(root);
  }

  /** A view that does not scroll (an empty or short conversation) always shows its newest part. */
  #reportScroll() {
    const scrolls = this.scroller.scrollHeight - this.scroller.clientHeight > 1;
    this.onScrollState?.(this.atBottom || !scrolls);
  }

  scrollToBottom() {
    this.atBottom = true;
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.#reportScroll();
  }

  reset() {
    this.atBottom = true;
    this.root.replaceChildren();
    this.views = [];
    this.cards.clear();
    this.lanes.clear();
    this.top = this.#topLane();
    this.setBusy(false);
  }

  /** The top agent's live output, straight in the conversation. */
  #topLane() {
    return new Lane(this.root, {
      newCard: (callId, name, view) => this.#newCard(callId, name, view),
      onView: (view) => this.views.push(view),
      onActivity: () => this.#clearPending(),
    });
  }

  /** The lane an event belongs to: the top agent's, or a sub-agent's inside the card of its parent call.
   * @param {EventBase} payload
   * @returns {Lane} */
  #laneOf(payload) {
    const parent = payload.parent_call_id;
    if (!parent) return this.top;
    let lane = this.lanes.get(parent);
    if (!lane) {
      const card = this.cards.get(parent);
      const container = card ? card.nest(payload.agent) : this.#strayContainer(payload);
      lane = new Lane(container, {
        newCard: (callId, name, view) => this.#newCard(callId, name, view),
        onActivity: () => this.#clearPending(),
      });
      this.lanes.set(parent, lane);
    }
    return lane;
  }

  /** A sub-agent whose parent call is not shown (it should not happen): its work at the end, labelled.
   * @param {EventBase} payload */
  #strayContainer(payload) {
    const body = h("div", { class: "sub-agent-body" });
    this.root.append(h("section", { class: "sub-agent stray", "data-agent": payload.agent ?? "" },
      h("div", { class: "sub-agent-head" }, h("span", { class: "sub-agent-arrow", text: "↳" }),
        h("span", { class: "sub-agent-name", text: payload.agent ?? "sub-agent" })),
      body));
    return body;
  }

  /** The welcome's examples: the demo's own tasks (get_status demo_suggestions), else ours.
   * @param {string[] | null | undefined} suggestions */
  setExamples(suggestions) {
    this.examples = suggestions?.length ? suggestions : EXAMPLES;
    if (this.root.querySelector(".welcome")) this.showWelcome();
  }

  showWelcome() {
    this.reset();
    const examples = this.examples.map((text) =>
      h("button", { type: "button", class: "example", "data-testid": "welcome-example", onclick: () => this.handlers.onExample(text) }, text));
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
    const plans = latestPlans(path);
    const planViews = [];
    let task = -1;
    let plan = null;
    const condensed = activeSummary(path);
    path.forEach((record, position) => {
      if (summaryOf(record)) return; // shown where its cut falls
      if (condensed && position === condensed.cut) this.root.append(summaryBlock(condensed.record.content, summaryOf(condensed.record)));
      const shown = this.root.childElementCount;
      if (record.role === "user" && !isPlanPrompt(record)) {
        task = position;
        plan = null;
      }
      if (record.meta?.plan && !plan) {
        plan = new PlanView();
        plan.set(plans.get(task));
        planViews.push(plan);
        this.root.append(plan.el);
      }
      if (isPlanPrompt(record)) this.#appendPlanPrompt(record);
      else if (record.role === "user") this.#appendUser(record.content ?? "", record);
      else if (record.role === "assistant") this.#appendAssistantRecord(index, record, running && record === newest);
      if (condensed && position > 0 && position < condensed.cut) {
        for (const el of [...this.root.children].slice(shown)) el.classList.add("condensed");
      }
    });
    for (const view of planViews) if (view !== plan || !running) view.settle();
    if (running && plan) this.top.adoptPlan(plan); // the task still running goes on updating it
    this.decorate(index);
    this.safety.place();
    this.scrollToBottom();
  }

  /** An instruction a plan_execute agent gave itself: no bubble; where a step begins, a divider. */
  #appendPlanPrompt(record) {
    const step = record.meta.plan_step;
    if (Number.isInteger(step)) this.root.append(stepDivider(step, record.meta.plan));
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

  /** History: end each shown task whose end is known (ends: user message id -> {reason, usage}) with its marker. */
  markTaskEnds(ends) {
    const users = this.views.filter((view) => view instanceof UserMessage);
    users.forEach((view, position) => {
      const end = ends?.[view.record?.id];
      if (!end) return;
      const undo = this.root.querySelector(`.task-undo[data-message-id="${CSS.escape(view.record.id)}"]`);
      this.root.insertBefore(taskEndMarker(end.reason, end.usage, end.budget), undo ?? users[position + 1]?.el ?? null);
    });
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
    const answers = this.views.filter((view) => view instanceof AssistantView);
    for (const view of answers) view.setRegenerate(view === answers.at(-1) && this.editable ? () => this.handlers.onRegenerate?.() : null);
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
    this.lanes.clear();
    this.top = this.#topLane();
    this.pending = null;
  }

  /** An optimistic user message, waiting for the server's ack.
   * @param {string} text
   * @param {{skill?: string, attachments?: Array<{path: string}>}} [options] */
  addUserMessage(text, { skill, attachments } = {}) {
    this.root.querySelector(".welcome")?.remove();
    const message = this.#appendUser(text, null);
    message.setSkill(skill);
    message.setAttachments(attachments);
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

  /** @param {TokenEvent} payload */
  onToken(payload) {
    this.#laneOf(payload).token(payload);
  }

  /** @param {ThinkingEvent} payload */
  onThinking(payload) {
    this.#laneOf(payload).thinking(payload);
  }

  /** @param {PlanEvent} payload */
  onPlan(payload) {
    this.#laneOf(payload).planEvent(payload);
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

  /** @param {ToolEvent} payload */
  onTool(payload) {
    const card = this.cards.get(payload.call_id) ?? this.#laneOf(payload).newCard(payload);
    this.#clearPending();
    switch (payload.phase) {
      case "args": card.appendArgs(payload.delta); break;
      case "end": card.setArguments(payload.arguments); break;
      case "approval": card.showApproval(payload.preview, payload.warnings); break;
      case "output": card.appendOutput(payload.delta); break;
      case "result":
        this.lanes.get(payload.call_id)?.finishLive();
        card.setResult(payload);
        this.safety.attachProposal(card, payload.details?.proposal, true);
        break;
      default: break;
    }
  }

  /** @param {StatusEvent} payload */
  onStatus(payload) {
    this.#laneOf(payload).status(payload);
  }

  /** The history being condensed. Returns false when the first message still sent as it is
   * is not shown here (the history must then be rendered again).
   * @param {ContextEvent} payload
   * @returns {boolean} */
  onContext(payload) {
    this.condensing?.remove();
    this.condensing = null;
    if (payload.phase === "condensing") {
      this.condensing = h("div", { class: "inline-notice info condensing", role: "status", "data-testid": "condensing" },
        h("span", { class: "spinner" }), h("span", { text: "Condensing the older part of the conversation…" }));
      this.root.append(this.condensing);
      return true;
    }
    if (payload.phase !== "condensed") return true;
    const children = [...this.root.children];
    const anchor = children.find((el) => el.dataset.messageId === payload.first_kept_id);
    if (!anchor) return false;
    const first = this.views.find((view) => view instanceof UserMessage)?.el;
    for (const el of children.slice(0, children.indexOf(anchor))) {
      if (el.classList.contains("context-summary")) el.remove(); // the new summary takes over from it
      else if (el !== first) el.classList.add("condensed");
    }
    this.root.insertBefore(summaryBlock(payload.summary, {
      summarized: payload.summarized, tokens_before: payload.tokens_before, tokens_after: payload.tokens_after,
    }), anchor);
    return true;
  }

  /** @param {ErrorEvent} payload */
  onError(payload) {
    this.#clearPending();
    this.showNotice(`${payload.message ?? "Error"}${payload.code ? ` (${payload.code})` : ""}`);
  }

  /** @param {DoneEvent} payload */
  onDone(payload) {
    for (const lane of [this.top, ...this.lanes.values()]) {
      lane.finishLive();
      lane.plan?.settle();
    }
    this.setBusy(false);
    const reason = payload.reason ?? "complete";
    for (const card of this.cards.values()) card.interrupt(reason === "cancelled" ? "cancelled" : "interrupted");
    this.root.append(taskEndMarker(reason, payload.usage ?? {}, payload.budget));
    this.safety.taskEnded(this.cards.values());
  }
}
