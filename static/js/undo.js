// @ts-check
// Undoing tasks of the open conversation: one task ("Undo this task", asked first when the server lists what it
// will change), or the tasks an edit leaves on another branch; the list of undoable tasks kept current.
import { askUndoTask, undoTasks } from "./undoprompts.js";

/** @typedef {import("./session.js").Session} Session */

const UNDO_TIMEOUT_MS = 30_000;

/** Before "Undo this task": list what it will remove, restore and leave, and ask (null: cancelled).
 * @param {Session} session
 * @param {string} messageId the task's user message */
export function confirmUndo(session, messageId) {
  return askUndoTask(session.request, session.cid, messageId);
}

/** Undo a task, overwriting the paths in `overwrite` (changed since the task); the file tree follows.
 * @param {Session} session
 * @param {string} messageId
 * @param {string[]} overwrite */
export async function undoTask(session, messageId, overwrite) {
  const ack = await session.request("undo_task", { conversation_id: session.cid, message_id: messageId, overwrite }, UNDO_TIMEOUT_MS);
  if (ack.ok) session.tree.refresh();
  return ack;
}

/** Undo the tasks an edit leaves on another branch, newest first: what to say of the paths left as they are
 * (changed since), or null on failure.
 * @param {Session} session
 * @param {string[]} tasks
 * @param {string[]} overwrite */
export async function undoOtherBranch(session, tasks, overwrite) {
  const done = await undoTasks(session.request, session.cid, tasks, overwrite);
  if (!done.ok) {
    session.composer.showError(`Could not undo the other branch's changes: ${done.error?.message ?? "unknown error"}`);
    return null;
  }
  session.undoable = session.undoable.filter((id) => !tasks.includes(id) || done.left.includes(id));
  session.chat.safety.setUndoable(session.undoable);
  session.tree.refresh();
  return done.kept.length ? `Changed since their task, so left as they are: ${done.kept.map((c) => c.path).join(", ")}.` : "";
}
