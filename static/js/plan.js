// @ts-check
// A plan_execute task's plan as a checklist (live from `plan` events, or from the history's `meta.plan`).
import { h, icon } from "./dom.js";

/** @typedef {import("./events.js").Plan} Plan */
/** @typedef {import("./events.js").PlanEvent} PlanEvent */

const STATUS_TEXT = { pending: "pending", running: "running", done: "done", failed: "failed" };

function marker(status, ended) {
  if (status === "running" && ended) return icon("close");
  if (status === "running") return h("span", { class: "spinner", role: "img", "aria-label": "running" });
  if (status === "done") return icon("check");
  if (status === "failed") return icon("close");
  return h("span", { class: "plan-pending", "aria-hidden": "true", text: "○" });
}

/** Whether a record is an instruction a plan_execute agent gave itself (not typed by the user). */
export function isPlanPrompt(record) {
  const meta = record?.meta ?? {};
  return record?.role === "user" && (meta.plan_prompt !== undefined || meta.plan_step !== undefined);
}

/** The small muted line where a step begins: "Step 2: Write the report". */
export function stepDivider(index, plan) {
  const step = (plan?.steps ?? []).find((s) => s.index === index);
  const text = step ? `Step ${index}: ${step.title}` : `Step ${index}`;
  return h("div", { class: "plan-step-divider", "data-step": index, role: "separator" }, h("span", { text }));
}

export class PlanView {
  constructor() {
    this.list = h("ol", { class: "plan-steps" });
    this.note = h("p", { class: "plan-note", hidden: true });
    this.state = h("span", { class: "plan-state" });
    this.el = h(
      "section",
      { class: "plan", "data-testid": "plan", "aria-label": "Plan" },
      h("header", { class: "plan-head" }, icon("check", "plan-icon"), h("span", { class: "plan-title", text: "Plan" }), this.state),
      this.list,
      this.note,
    );
    this.steps = [];
    this.ended = false;
    this.set({ revision: 0, steps: [] });
  }

  get hasSteps() {
    return this.steps.length > 0;
  }

  /** Show a whole plan ({revision, steps: [{index, title, status, summary?}]}).
   * @param {Plan | null | undefined} plan
   * @param {{reason?: string}} [options] */
  set(plan, { reason } = {}) {
    this.plan = plan;
    this.steps = Array.isArray(plan?.steps) ? plan.steps : [];
    const revision = Number(plan?.revision) || 0;
    this.el.dataset.revision = String(revision);
    this.list.replaceChildren(...this.steps.map((step) => this.#row(step)));
    if (!this.steps.length) {
      this.list.append(this.ended ? h("li", { class: "plan-empty", text: "No plan was made." })
        : h("li", { class: "plan-empty" }, h("span", { class: "spinner" }), "Planning…"));
    }
    const done = this.steps.filter((step) => step.status === "done").length;
    this.state.textContent = this.steps.length ? `${done}/${this.steps.length} done` : "";
    if (reason) this.note.textContent = `Re-planned (${reason})`;
    else if (revision > 0 && !this.note.textContent) this.note.textContent = `Re-planned ${revision === 1 ? "once" : `${revision} times`}`;
    this.note.hidden = !this.note.textContent;
  }

  /** The task ended (or is only history): nothing is running any more. */
  settle() {
    if (this.ended) return;
    this.ended = true;
    this.el.dataset.ended = "true";
    this.set(this.plan);
  }

  /** Apply a `plan` event.
   * @param {PlanEvent} payload */
  update(payload) {
    this.set(payload.plan, { reason: payload.phase === "replanned" ? payload.reason : undefined });
    this.el.dataset.phase = payload.phase ?? "";
  }

  #row(step) {
    const status = STATUS_TEXT[step.status] ? step.status : "pending";
    const stopped = status === "running" && this.ended;
    return h(
      "li",
      { class: "plan-step", "data-status": stopped ? "stopped" : status, "data-index": step.index, title: stopped ? "stopped" : STATUS_TEXT[status] },
      h("span", { class: "plan-marker" }, marker(status, this.ended)),
      h("span", { class: "plan-step-text" },
        h("span", { class: "plan-step-title" }, h("span", { class: "plan-index", text: `${step.index}.` }), " ", step.title ?? ""),
        step.summary && (status === "done" || status === "failed")
          ? h("span", { class: "plan-step-summary", text: step.summary }) : null),
    );
  }
}
