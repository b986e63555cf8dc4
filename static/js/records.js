// @ts-check
// Pieces of the conversation pane drawn from stored records: a task's end line, a condensed turn's summary,
// a tool call's result, the newest plan of each task.
import { budgetEndText } from "./budget.js";
import { formatCount, h } from "./dom.js";
import { costText } from "./money.js";
import { isPlanPrompt } from "./plan.js";

/** @typedef {import("./events.js").Usage} Usage */
/** @typedef {import("./budget.js").BudgetEnd} BudgetEnd */
/** @typedef {import("./history.js").MessageRecord} MessageRecord */

const END_TEXT = {
  cancelled: "Stopped.",
  max_iterations: "Stopped: the agent reached its step limit for one task.",
  error: "The task ended with an error.",
  interrupted: "Interrupted: the server process running it stopped. Send a message to go on.",
  budget: "Stopped: a budget was reached.",
  loop: "Stopped: the model kept repeating itself (the same call with the same result, or the same text over and over).",
};

const COST_MEANING = "What this task's model calls cost at the model's price (cached prompt tokens at the cached rate); "
  + "“price unknown” when the model's price is not known: set it in AGENT_PRICES";

/** The line that ends a task: why it stopped (unless it completed) and the tokens it used; a budget's
 * end keeps its budget on the line (Followup offers to raise it).
 * @param {string} reason
 * @param {Partial<Usage>} [usage]
 * @param {BudgetEnd} [budget] */
export function taskEndMarker(reason, usage = {}, budget = undefined) {
  const about = usage.estimated ? "~" : "";
  const tokens = usage.prompt_tokens || usage.completion_tokens
    ? `${about}${formatCount(usage.prompt_tokens)} in · ${about}${formatCount(usage.completion_tokens)} out` : "";
  const counted = usage.estimated
    ? "Estimated (the model server sent no token counts, or the reply was stopped before it did): tokens this task's model calls read (in) and wrote (out), added up"
    : "Tokens this task's model calls read (in) and wrote (out), added up";
  const cost = tokens ? costText(usage) : "";
  const text = budget ? budgetEndText(budget) : END_TEXT[reason] ?? (reason === "complete" ? "" : `Ended: ${reason}`);
  const marker = h(
    "div",
    { class: `task-end reason-${reason}`, "data-reason": reason },
    text ? h("span", { class: "task-end-text", text }) : null,
    tokens ? h("span", { class: "task-usage", title: `${counted}: each call reads the whole context again, so “in” outgrows the context meter`, text: tokens }) : null,
    cost ? h("span", { class: "task-cost", "data-testid": "task-cost", title: COST_MEANING, text: cost }) : null,
  );
  if (budget) marker.dataset.budget = JSON.stringify(budget);
  return marker;
}

/** Where older turns were condensed: the summary that replaces them for the model, folded.
 * @param {string | undefined} text
 * @param {{summarized?: number, tokens_before?: number, tokens_after?: number}} [summary] */
export function summaryBlock(text, summary = {}) {
  const tokens = Number.isFinite(summary.tokens_before) && Number.isFinite(summary.tokens_after)
    ? ` · context ${formatCount(summary.tokens_before)} → ${formatCount(summary.tokens_after)} tokens` : "";
  const count = Number.isInteger(summary.summarized) ? `${summary.summarized} earlier messages` : "Earlier messages";
  return h("details", { class: "context-summary", "data-testid": "context-summary" },
    h("summary", { title: "The agent now sees this summary instead of the greyed messages above" },
      `${count} summarised${tokens}`),
    h("div", { class: "context-summary-text", text: text ?? "" }));
}

/** A result record of the history as a call's result (toolcard.js `CallResult`).
 * @param {MessageRecord} record */
export function resultFromRecord(record) {
  const meta = record.meta ?? {};
  const ok = meta.ok !== false;
  const output = record.content ?? "";
  const cancelled = meta.cancelled ?? (!ok && CANCELLED_TEXT.test(output));
  return {
    ok, output, duration_ms: meta.duration_ms, declined: meta.declined ?? declinedBefore(ok, output),
    cancelled: cancelled || undefined, unchanged: meta.unchanged || undefined,
  };
}

// What a call the user's stop cut said to the model before records said `cancelled` (core/tool_step.py).
const CANCELLED_TEXT = /^Cancelled: the user stopped the task /;

// What a declined call's record said to the model before records said `declined` (core/tool_step.py).
const DECLINED_TEXT = /^The user declined this /;

/** Whether a result recorded without `meta.declined` (by a version before it was written, history on disk) was
 * a declined call's: read from the text written for the model, the only sign those records have.
 * @param {boolean} ok
 * @param {string} output */
function declinedBefore(ok, output) {
  return !ok && DECLINED_TEXT.test(output);
}

/** For each task on the path (by the position of its user message), the newest plan among its records. */
export function latestPlans(path) {
  const plans = new Map();
  let task = -1;
  path.forEach((record, position) => {
    if (record.role === "user" && !isPlanPrompt(record)) task = position;
    if (record.meta?.plan) plans.set(task, record.meta.plan);
  });
  return plans;
}
