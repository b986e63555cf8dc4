// @ts-check
// Tokens and cost as the CLI writes them (core/spend.py money_text, spend_text): `$0.0123`,
// `~¥1.20 (estimated)`, `price unknown` (never `$0`).

/** @typedef {import("./events.js").Money} Money */
/** @typedef {import("./events.js").Usage} Usage */

const CURRENCY_SIGNS = { USD: "$", CNY: "¥", EUR: "€", GBP: "£" };

/** @param {Money | null | undefined} cost @param {boolean} [estimated] */
export function moneyText(cost, estimated = false) {
  if (!cost) return "price unknown";
  const amount = Number(cost.amount) || 0;
  const digits = amount >= 1 ? 2 : 4;
  const sign = CURRENCY_SIGNS[cost.currency];
  const figure = sign ? `${sign}${amount.toFixed(digits)}` : `${amount.toFixed(digits)} ${cost.currency}`;
  return estimated ? `~${figure} (estimated)` : figure;
}

/** Whether any model call was counted. @param {Partial<Usage> | null | undefined} usage */
export function hasCalls(usage) {
  return Boolean(usage?.prompt_tokens || usage?.completion_tokens);
}

/** What the calls cost, or "" when no call was made or the record predates costs (no `cost` key).
 * @param {Partial<Usage> | null | undefined} usage */
export function costText(usage) {
  if (!usage || !hasCalls(usage) || !("cost" in usage)) return "";
  return moneyText(usage.cost, Boolean(usage.estimated));
}

/** `1,234 in · 56 out · $0.0012` (`~` on estimated figures; no price part without a call).
 * @param {Partial<Usage> | null | undefined} usage */
export function spendText(usage) {
  const about = usage?.estimated ? "~" : "";
  const count = (n) => (Number(n) || 0).toLocaleString("en-US");
  let text = `${about}${count(usage?.prompt_tokens)} in · ${about}${count(usage?.completion_tokens)} out`;
  if (usage?.cached_prompt_tokens) text += ` (${count(usage.cached_prompt_tokens)} cached)`;
  const cost = costText(usage);
  return cost ? `${text} · ${cost}` : text;
}
