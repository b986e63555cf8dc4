// @ts-check
// A task a budget stopped (done.budget, or its task end kept in meta.json): what its end line says, and
// the higher limit "Continue with a higher limit once" sends as send_message `budget_override`.

/**
 * @typedef {{amount: number, unit: string}} Amount  unit: "tokens" or a currency code
 * @typedef {{scope: "task" | "conversation" | "day", limit: Amount, used: Amount, estimated?: boolean, unpriced_calls?: number}} BudgetEnd
 * @typedef {{scope: BudgetEnd["scope"], limit: Amount}} RaisedLimit  send_message's budget_override
 */

const SIGNS = { USD: "$", CNY: "¥", EUR: "€", GBP: "£" };

/** `200,000 tokens`, `$0.50`, `3.00 CHF`.
 * @param {Amount} amount */
export function amountText({ amount, unit }) {
  if (unit === "tokens") return `${amount.toLocaleString("en-US")} tokens`;
  const figure = amount.toFixed(amount >= 1 ? 2 : 4);
  const sign = SIGNS[/** @type {keyof typeof SIGNS} */ (unit)];
  return sign ? `${sign}${figure}` : `${figure} ${unit}`;
}

/** The end line's words for a task a budget stopped.
 * @param {BudgetEnd} budget */
export function budgetEndText(budget) {
  const limit = amountText(budget.limit);
  if (budget.unpriced_calls) return `Stopped: the ${budget.scope} budget of ${limit} cannot be kept, a model call's price is unknown.`;
  const about = budget.estimated ? "~" : "";
  return `Stopped: the ${budget.scope} budget of ${limit} is reached (${about}${amountText(budget.used)} used).`;
}

/** The once-only override offered after it: the same budget at twice its limit.
 * @param {BudgetEnd} budget
 * @returns {RaisedLimit} */
export function raisedLimit(budget) {
  const { amount, unit } = budget.limit;
  return { scope: budget.scope, limit: { amount: unit === "tokens" ? Math.round(amount * 2) : amount * 2, unit } };
}
