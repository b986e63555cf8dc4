// @ts-check
// The conversation tree (docs/protocol.md §5 message records): paths, siblings and branch leaves.

/** @typedef {import("./events.js").Usage} Usage */
/** @typedef {import("./events.js").Plan} Plan */

/** A file sent with a message (docs/protocol.md §11): the upload's answer, kept in the record's meta.
 * @typedef {{path: string, name?: string, size?: number, kind?: string, note?: string, mime?: string}} Attachment */

/** A summary record's `meta.summary` (§12).
 * @typedef {{first_kept_id: string, summarized: number, trigger: string, tokens_before: number, tokens_after: number}} SummaryMeta */

/**
 * The `meta` keys the program writes on records (protocol/records.py `MessageMeta`), each on some roles only.
 * @typedef {object} RecordMeta
 * @property {string} [skill] user
 * @property {Attachment[]} [attachments] user
 * @property {string} [plan_prompt] user: created | replanned | finish | final
 * @property {number} [plan_step] user
 * @property {Plan} [plan] user (with plan_prompt or plan_step), tool (make_plan, finish_step)
 * @property {Usage} [usage] assistant
 * @property {string | boolean} [interrupted] assistant: cancelled | stream_cut | loop; tool: true
 * @property {boolean} [ok] tool
 * @property {boolean} [declined] tool: the user declined the call (written since it was; older records lack it)
 * @property {boolean} [cancelled] tool: the user's stop cut the call (written since it was; older records lack it)
 * @property {boolean} [unchanged] tool: the call found nothing to change (propose_edit)
 * @property {number} [duration_ms] tool
 * @property {{id: string, path: string, diff: string}} [proposal] tool (propose_edit)
 * @property {string} [agent] tool (a delegation)
 * @property {SummaryMeta} [summary] system
 */

/**
 * A message record: one line of messages.jsonl (protocol/records.py `MessageRecord`).
 * @typedef {object} MessageRecord
 * @property {string} id
 * @property {string} conversation_id
 * @property {string | null} parent_id
 * @property {number} depth
 * @property {number} version
 * @property {"system" | "user" | "assistant" | "tool"} role
 * @property {string} content
 * @property {string} [reasoning_content]
 * @property {Array<{id: string, type: "function", function: {name: string, arguments: string}}>} [tool_calls]
 * @property {string} [tool_call_id]
 * @property {string} [name]
 * @property {string} created_at
 * @property {RecordMeta} meta
 * @property {number} [seq]
 */

/** How a task ended (meta.json's `task_ends`): its `done`'s reason, the tokens it used, the budget that stopped it.
 * @typedef {{reason: import("./events.js").DoneReason, usage: Usage, budget?: import("./budget.js").BudgetEnd}} TaskEnd */

/** meta.json (§5): the conversation and what it keeps in its free-form `meta`.
 * @typedef {{id: string, title: string | null, agent_type: string, created_at: string, updated_at: string,
 *   meta: {mode?: string, approval?: string, agent?: string, focus?: string[], title_by_user?: boolean, last_seq?: number,
 *   task_ends?: Record<string, TaskEnd>}}} ConversationMeta */

/**
 * A conversation's records indexed: by id, the children of each parent (null: the roots) in order, each
 * record's position, the tool result of each call id, and the newest leaf.
 * @typedef {object} HistoryIndex
 * @property {MessageRecord[]} records
 * @property {Map<string, MessageRecord>} byId
 * @property {Map<string | null, MessageRecord[]>} children
 * @property {Map<string, number>} order
 * @property {Map<string, MessageRecord>} toolResults
 * @property {string | null} latestLeaf
 */

/** Index a conversation's records; the last record is the newest leaf.
 * @param {MessageRecord[]} records
 * @returns {HistoryIndex} */
export function buildIndex(records) {
  const byId = new Map();
  const children = new Map();
  const order = new Map();
  const toolResults = new Map();
  records.forEach((record, position) => {
    byId.set(record.id, record);
    order.set(record.id, position);
    const parent = record.parent_id ?? null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(record);
    if (record.role === "tool" && record.tool_call_id) toolResults.set(record.tool_call_id, record);
  });
  return { records, byId, children, order, toolResults, latestLeaf: records.at(-1)?.id ?? null };
}

/** The records from the root down to leafId.
 * @param {HistoryIndex} index
 * @param {string | null} leafId
 * @returns {MessageRecord[]} */
export function pathTo(index, leafId) {
  const path = [];
  const seen = new Set();
  let id = leafId;
  while (id && index.byId.has(id) && !seen.has(id)) {
    seen.add(id);
    const record = index.byId.get(id);
    path.push(record);
    id = record.parent_id;
  }
  return path.reverse();
}

/** The records sharing this record's parent and role, oldest first (the record included).
 * @param {HistoryIndex} index
 * @param {MessageRecord} record */
export function siblingsOf(index, record) {
  const family = index.children.get(record.parent_id ?? null) ?? [];
  return family.filter((other) => other.role === record.role);
}

/** The newest record under id (itself included): children are always newer than parents, so it is a leaf.
 * @param {HistoryIndex} index
 * @param {string} id */
export function newestLeafUnder(index, id) {
  let best = id;
  const stack = [id];
  while (stack.length) {
    const current = stack.pop();
    if (index.order.get(current) > index.order.get(best)) best = current;
    for (const child of index.children.get(current) ?? []) stack.push(child.id);
  }
  return best;
}

/** A summary record's `meta.summary` (older turns condensed into it: history/condensed_view.py), or null.
 * @param {MessageRecord | null | undefined} record
 * @returns {SummaryMeta | null} */
export function summaryOf(record) {
  const summary = record?.role === "system" ? record.meta?.summary : null;
  return summary && typeof summary.first_kept_id === "string" ? summary : null;
}

/** The summary the model's view of this path uses, as {record, cut} (cut: the position of the first
 * record still sent as it is), or null. The records between the root and the cut are replaced by it.
 * @param {MessageRecord[]} path
 * @returns {{record: MessageRecord, cut: number} | null} */
export function activeSummary(path) {
  for (let index = path.length - 1; index > 0; index -= 1) {
    const summary = summaryOf(path[index]);
    if (!summary) continue;
    const cut = path.findIndex((record, position) => position > 0 && position < index && record.id === summary.first_kept_id);
    if (cut > 0) return { record: path[index], cut };
  }
  return null;
}
