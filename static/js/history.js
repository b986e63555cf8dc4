// @ts-check
// The conversation tree (docs/protocol.md §5 message records): paths, siblings and branch leaves.

/** Index a conversation's records; the last record is the newest leaf. */
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

/** The records from the root down to leafId. */
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

/** The records sharing this record's parent and role, oldest first (the record included). */
export function siblingsOf(index, record) {
  const family = index.children.get(record.parent_id ?? null) ?? [];
  return family.filter((other) => other.role === record.role);
}

/** The newest record under id (itself included): children are always newer than parents, so it is a leaf. */
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

/** A summary record's `meta.summary` (older turns condensed into it: history/condensed_view.py), or null. */
export function summaryOf(record) {
  const summary = record?.role === "system" ? record.meta?.summary : null;
  return summary && typeof summary.first_kept_id === "string" ? summary : null;
}

/** The summary the model's view of this path uses, as {record, cut} (cut: the position of the first
 * record still sent as it is), or null. The records between the root and the cut are replaced by it. */
export function activeSummary(path) {
  for (let index = path.length - 1; index > 0; index -= 1) {
    const summary = summaryOf(path[index]);
    if (!summary) continue;
    const cut = path.findIndex((record, position) => position > 0 && position < index && record.id === summary.first_kept_id);
    if (cut > 0) return { record: path[index], cut };
  }
  return null;
}
