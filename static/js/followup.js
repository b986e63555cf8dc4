// @ts-check
// After a task that failed, was stopped or reached its step limit: Retry (the last message sent again, as a
// new version of it: the same place in the tree, like editing it unchanged) and Continue ("continue"); after
// a budget stopped it, also Continue with that budget raised for that one task.
import { amountText, raisedLimit } from "./budget.js";
import { h, icon } from "./dom.js";
import { pathTo } from "./history.js";
import { isPlanPrompt } from "./plan.js";

const OFFERED = new Set(["error", "cancelled", "max_iterations", "interrupted", "budget", "loop"]);

/** The last message the user wrote on the path to leafId (not an instruction a plan gave itself). */
export function lastUserRecord(index, leafId) {
  if (!index || !leafId) return null;
  return pathTo(index, leafId).findLast((record) => record.role === "user" && !isPlanPrompt(record)) ?? null;
}

/** What sets the two Continues apart, in words: the budget each goes on under.
 * @param {import("./budget.js").BudgetEnd} budget
 * @param {import("./budget.js").RaisedLimit} raised */
function continueMeaning(budget, raised) {
  const reached = budget.scope === "task" ? "" : ", which is reached";
  return `Continue goes on under the usual ${budget.scope} budget of ${amountText(budget.limit)}${reached}. `
    + `Continue with a higher limit once allows ${amountText(raised.limit)} for this one task; the task after it has `
    + "the usual limit again.";
}

export class Followup {
  /** root: the conversation pane; handlers: onRetry(), onContinue(), onRaise(override) (Continue with the
   * budget that stopped the task raised, for that task only). */
  constructor(root, { onRetry, onContinue, onRaise }) {
    this.root = root;
    this.handlers = { onRetry, onContinue, onRaise };
    // Under the newest task's end line, live or from the history (markers go in oldest first).
    new MutationObserver((mutations) => {
      for (const mutation of mutations) {
        for (const node of mutation.addedNodes) {
          if (node instanceof Element && node.classList.contains("task-end")) this.#offer(node);
        }
      }
    }).observe(root, { childList: true });
  }

  /** Take the buttons away (a new message is on its way). */
  clear() {
    this.root.querySelectorAll(".task-followup").forEach((row) => row.remove());
  }

  #offer(end) {
    this.clear();
    if (!OFFERED.has(end.dataset.reason)) return;
    const act = (handler) => () => {
      this.clear();
      handler();
    };
    const budget = end.dataset.budget ? JSON.parse(end.dataset.budget) : null;
    const raised = budget && !budget.unpriced_calls ? raisedLimit(budget) : null;
    end.after(h(
      "div",
      { class: "task-followup", "data-testid": "task-followup" },
      h("button", { type: "button", class: "btn btn-sm", "data-testid": "retry", title: "Send your last message again, as a new version of it", onclick: act(this.handlers.onRetry) },
        icon("refresh"), "Retry"),
      h("button", { type: "button", class: "btn btn-sm", "data-testid": "continue", title: "Ask the agent to go on from where it stopped", onclick: act(this.handlers.onContinue) },
        icon("right"), "Continue"),
      raised ? h("button", {
        type: "button", class: "btn btn-sm", "data-testid": "continue-raised",
        title: `Go on with the ${raised.scope} budget at ${amountText(raised.limit)} for this one task; the next task has the usual limit again`,
        onclick: act(() => this.handlers.onRaise(raised)),
      }, icon("right"), `Continue with a higher limit once (${amountText(raised.limit)})`) : null,
      raised ? h("p", { class: "followup-meaning", "data-testid": "continue-meaning", text: continueMeaning(budget, raised) }) : null,
    ));
  }
}
