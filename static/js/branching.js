// @ts-check
// Branches of the open conversation: switching the branch shown, and editing a past message, which sends the
// new text as a branch beside it. The tasks from it on stay on the old branch; when they changed files, the user
// chooses: keep those changes, undo them first, or undo them overwriting what changed since.
import { newestLeafUnder, pathTo } from "./history.js";
import { askOtherBranch, undoableChanges } from "./undoprompts.js";
import { undoOtherBranch } from "./undo.js";
import { sendMessage } from "./sending.js";

/** @typedef {import("./session.js").Session} Session */
/** @typedef {import("./history.js").MessageRecord} MessageRecord */

/** Show the branch that holds recordId, down to its newest message.
 * @param {Session} session
 * @param {string} recordId */
export function switchBranch(session, recordId) {
  if (!session.index || session.feed.isRunning(session.cid)) return;
  session.viewLeaf = newestLeafUnder(session.index, recordId);
  session.render();
}

/** Send an edited message as a new branch, once what the tasks it leaves behind changed is settled.
 * @param {Session} session
 * @param {MessageRecord} record the message edited
 * @param {string} text its new text */
export async function editMessage(session, record, text) {
  if (session.feed.isRunning(session.cid)) return;
  const cid = session.cid;
  const notice = await settleOtherBranch(session, record);
  if (notice === null || session.cid !== cid) return;
  session.chat.truncateFrom(record);
  if (notice) session.chat.showNotice(notice, "info").dataset.testid = "other-branch-notice";
  const { skill, attachments } = record.meta ?? {};
  const ok = await sendMessage(session, text, { parentId: record.parent_id ?? null, skill, attachments });
  if (!ok && session.index) session.render();
}

/** Ask what to do with the other branch's changes and do it. Resolves to the notice the page shows ("" for
 * none), or null when the user cancelled, the conversation changed meanwhile, or the undo failed.
 * @param {Session} session
 * @param {MessageRecord} record the message being edited */
async function settleOtherBranch(session, record) {
  const cid = session.cid;
  const changes = await otherBranchChanges(session, record);
  if (session.cid !== cid) return null;
  if (!changes.files.length && !changes.conflicts.length) return "";
  const answer = await askOtherBranch(changes);
  if (answer === null || session.cid !== cid) return null;
  if (answer === "keep") {
    const paths = [...changes.files, ...changes.conflicts].map((file) => file.path).join(", ");
    return `The workspace still holds the other branch's changes to ${paths}.`;
  }
  const overwrite = answer === "overwrite" ? changes.conflicts.map((conflict) => conflict.path) : [];
  return undoOtherBranch(session, changes.tasks, overwrite);
}

/** The files the tasks from `record` on (on the shown branch) changed and could still undo, and the conflicts.
 * @param {Session} session
 * @param {MessageRecord} record */
async function otherBranchChanges(session, record) {
  const none = { files: [], conflicts: [], tasks: [] };
  if (!session.index || !session.cid) return none;
  const path = pathTo(session.index, session.viewLeaf);
  const from = path.findIndex((entry) => entry.id === record.id);
  const undoable = new Set(session.undoable);
  const tasks = path.slice(Math.max(from, 0)).filter((entry) => entry.role === "user" && undoable.has(entry.id)).map((entry) => entry.id);
  if (!tasks.length) return none;
  return { ...(await undoableChanges(session.request, session.cid, tasks)), tasks };
}
