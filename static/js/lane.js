// @ts-check
// One agent's live output in one place: the top agent's in the conversation, a sub-agent's inside
// the card of the call that delegated to it. Streaming answers, where its tool cards go, its plan.
import { AssistantView } from "./messages.js";
import { PlanView, stepDivider } from "./plan.js";

/** @typedef {import("./events.js").TokenEvent} TokenEvent */
/** @typedef {import("./events.js").ThinkingEvent} ThinkingEvent */
/** @typedef {import("./events.js").ToolEvent} ToolEvent */
/** @typedef {import("./events.js").StatusEvent} StatusEvent */
/** @typedef {import("./events.js").PlanEvent} PlanEvent */

export class Lane {
  /** container: where its views go; hooks: {newCard(callId, name, view), onView(view), onActivity()}. */
  constructor(container, hooks) {
    this.container = container;
    this.hooks = hooks;
    this.live = null;
    this.iteration = null;
    this.plan = null;
  }

  /** The answer being streamed (a new one for another message id). */
  view(messageId) {
    this.hooks.onActivity?.();
    const current = this.live;
    if (current && (!messageId || current.messageId === messageId)) return current;
    current?.finish();
    const view = new AssistantView(messageId);
    view.iteration = this.iteration;
    view.setStreaming(true);
    this.container.append(view.el);
    this.hooks.onView?.(view);
    this.live = view;
    return view;
  }

  /** @param {TokenEvent} payload */
  token(payload) {
    this.view(payload.message_id).appendToken(payload.text);
  }

  /** @param {ThinkingEvent} payload */
  thinking(payload) {
    this.view(payload.message_id).appendThinking(payload.text);
  }

  /** A card for a call this agent starts; in a new answer when the call belongs to a later turn.
   * @param {ToolEvent} payload */
  newCard(payload) {
    if (this.live && this.#isLaterTurn(this.live)) this.finishLive();
    return this.hooks.newCard(payload.call_id, payload.name, this.view(null));
  }

  /** A new call belongs to a later model turn than the live answer: by `status` iteration, else because
   * calls of one turn all start before any of them finishes. */
  #isLaterTurn(view) {
    if (Number.isInteger(this.iteration) && Number.isInteger(view.iteration)) return this.iteration > view.iteration;
    return [...view.cards.children].some((el) => el.dataset.state === "ok" || el.dataset.state === "failed");
  }

  /** @param {StatusEvent} payload */
  status(payload) {
    if (Number.isInteger(payload.iteration)) this.iteration = payload.iteration;
  }

  /** A `plan` event: the checklist (made at the first one), and a divider where each step begins.
   * @param {PlanEvent} payload */
  planEvent(payload) {
    this.hooks.onActivity?.();
    this.finishLive(); // each step answers in views of its own
    if (payload.phase === "created" && this.plan?.hasSteps) this.plan = null; // a new task's plan
    if (!this.plan) this.adoptPlan(new PlanView());
    this.plan.update(payload);
    if (payload.phase === "step_started" && Number.isInteger(payload.step)) {
      this.container.append(stepDivider(payload.step, payload.plan));
    }
  }

  /** Take over a checklist (one rendered from the history of the task still running). */
  adoptPlan(plan) {
    if (!plan.el.isConnected) this.container.append(plan.el);
    this.plan = plan;
  }

  finishLive() {
    this.live?.finish();
    this.live = null;
  }
}
