// @ts-check
// Editing a past message makes a branch; the tasks from it on stay on the old branch. When they changed files,
// the user chooses: keep those changes, undo them first, or undo them overwriting what changed since.
import { pathTo } from "./history.js";
import { askOtherBranch, undoableChanges, undoTasks } from "./undoprompts.js";

/** @typedef {(event: string, payload?: object, timeoutMs?: number) => Promise<any>} Request */

/** Ask what to do with the other branch's changes and do it. Resolves to the notice the page shows ("" for
 * none), or null when the user cancelled, the conversation changed meanwhile, or the undo failed.
 * @param {import("./session.js").Session} session
 * @param {Request} request
 * @param {{id: string}} record the message being edited */
export async function settleOtherBranch(session, request, record) {
  const cid = session.cid;
  const changes = await otherBranchChanges(session, request, record);
  if (session.cid !== cid) return null;
  if (!changes.files.length && !changes.conflicts.length) return "";
  const answer = await askOtherBranch(changes);
  if (answer === null || session.cid !== cid) return null;
  if (answer === "keep") {
    const paths = [...changes.files, ...changes.conflicts].map((file) => file.path).join(", ");
    return `The workspace still holds the other branch's changes to ${paths}.`;
  }
  const overwrite = answer === "overwrite" ? changes.conflicts.map((conflict) => conflict.path) : [];
  return undoOtherBranch(session, request, changes.tasks, overwrite);
}

/** The files the tasks from `record` on (on the shown branch) changed and could still undo, and the conflicts.
 * @param {import("./session.js").Session} session
 * @param {Request} request
 * @param {{id: string}} record */
async function otherBranchChanges(session, request, record) {
  const none = { files: [], conflicts: [], tasks: [] };
  if (!session.index || !session.cid) return none;
  const path = pathTo(session.index, session.viewLeaf);
  const from = path.findIndex((entry) => entry.id === record.id);
  const undoable = new Set(session.undoable);
  const tasks = path.slice(Math.max(from, 0)).filter((entry) => entry.role === "user" && undoable.has(entry.id)).map((entry) => entry.id);
  if (!tasks.length) return none;
  return { ...(await undoableChanges(request, session.cid, tasks)), tasks };
}

/** Undo tasks newest first: what to say of the paths left as they are (changed since), or null on failure.
 * @param {import("./session.js").Session} session
 * @param {Request} request
 * @param {string[]} tasks
 * @param {string[]} overwrite */
async function undoOtherBranch(session, request, tasks, overwrite) {
  const done = await undoTasks(request, session.cid, tasks, overwrite);
  if (!done.ok) {
    session.composer.showError(`Could not undo the other branch's changes: ${done.error?.message ?? "unknown error"}`);
    return null;
  }
  session.undoable = session.undoable.filter((id) => !tasks.includes(id) || done.left.includes(id));
  session.chat.safety.setUndoable(session.undoable);
  session.tree.refresh();
  return done.kept.length ? `Changed since their task, so left as they are: ${done.kept.map((c) => c.path).join(", ")}.` : "";
}
