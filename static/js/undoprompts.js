// @ts-check
// The questions asked before undoing, from the server's undo_preview: before "Undo this task", and before
// an edit leaves on another branch tasks that changed files (undo those changes first, or keep them). Files
// changed since their task (conflicts) stay as they are unless the user chooses to overwrite them.
import { renderChangedFile } from "./changes.js";
import { choose, fileList, UNDO_VERBS } from "./dialog.js";
import { h } from "./dom.js";

/** @typedef {import("./requests.js").Request} Request */
/** @typedef {import("./requests.js").Conflict} Conflict */
/** @typedef {{path: string, action: string}} FileAction a file an undo changes, and how */

/** The paths changed since their task, each with why.
 * @param {Conflict[]} conflicts */
function conflictList(conflicts) {
  return h("ul", { class: "ask-files", "data-testid": "undo-conflicts" }, conflicts.map(({ path, reason }) =>
    h("li", { "data-action": "keep" }, h("code", { text: path }), h("span", { class: "ask-verb", text: `stays as it is: ${reason}` }))));
}

/** The dialog's text: the files the undo changes (after `intro`), then the conflicts it leaves.
 * @param {string} intro
 * @param {FileAction[]} files
 * @param {Conflict[]} conflicts */
function undoBody(intro, files, conflicts) {
  const body = files.length ? [h("p", { text: intro }), fileList(files, UNDO_VERBS)] : [];
  if (conflicts.length) {
    body.push(h("p", { text: "These changed since, so they stay as they are unless you overwrite them (losing what changed there):" }),
      conflictList(conflicts));
  }
  return body;
}

/** What the task changed, a diff per file, which the undo takes back (nothing when the server has none).
 * @param {Request} request
 * @param {string | null} cid
 * @param {string} messageId */
async function taskDiffs(request, cid, messageId) {
  const ack = cid ? await request("changes", { conversation_id: cid, message_id: messageId }) : null;
  const files = ack?.ok ? ack.tasks?.at(-1)?.files ?? [] : [];
  if (!files.length) return [];
  return [h("p", { text: "What the task changed, which the undo takes back:" }),
    h("div", { class: "undo-diffs", "data-testid": "undo-diffs" }, files.map(renderChangedFile))];
}

/** List what undoing the task will remove, restore and leave, and ask: null (cancelled) or {overwrite: [paths]}.
 * @param {Request} request errors come back as acks
 * @param {string | null} cid
 * @param {string} messageId
 * @returns {Promise<{overwrite: string[]} | null>} */
export async function askUndoTask(request, cid, messageId) {
  const preview = await request("undo_preview", { conversation_id: cid, message_id: messageId });
  const files = preview.ok ? preview.files ?? [] : [];
  const conflicts = preview.ok ? preview.conflicts ?? [] : [];
  if (!files.length && !conflicts.length) return { overwrite: [] }; // the undo itself says what there is
  const choices = conflicts.length ? [{ label: files.length ? "Overwrite them too" : "Overwrite them", value: "overwrite", kind: "danger" }] : [];
  if (files.length) choices.push(conflicts.length ? { label: "Undo the rest", value: "undo", kind: "primary" } : { label: "Undo", value: "undo", kind: "danger" });
  const answer = await choose({
    title: "Undo this task?",
    body: [...undoBody("These files go back to how they were before the task:", files, conflicts),
      ...(files.length ? await taskDiffs(request, cid, preview.message_id ?? messageId) : [])],
    choices,
    testid: "undo-dialog",
  });
  if (answer === null) return null;
  return { overwrite: answer === "overwrite" ? conflicts.map((conflict) => conflict.path) : [] };
}

/** What undoing the tasks (oldest first) would change.
 * @param {Request} request errors come back as acks
 * @param {string} cid
 * @param {string[]} tasks
 * @returns {Promise<{files: FileAction[], conflicts: Conflict[]}>} */
export async function undoableChanges(request, cid, tasks) {
  const previews = await Promise.all(tasks.map((id) => request("undo_preview", { conversation_id: cid, message_id: id })));
  const undone = new Set(tasks);
  /** @type {Map<string, FileAction>} the oldest task's action wins: undoing them all ends where it began */
  const byPath = new Map();
  /** @type {Map<string, Conflict>} */
  const conflicts = new Map();
  for (const preview of previews.filter((p) => p.ok)) {
    // A path a later one of these tasks changed is no conflict: that task is undone first.
    const ours = (preview.conflicts ?? []).filter((conflict) => undone.has(conflict.later_message_id));
    for (const conflict of preview.conflicts ?? []) if (!ours.includes(conflict) && !conflicts.has(conflict.path)) conflicts.set(conflict.path, conflict);
    for (const { path, action } of [...(preview.files ?? []), ...ours]) if (!byPath.has(path)) byPath.set(path, { path, action });
  }
  return { files: [...byPath.values()].filter((file) => !conflicts.has(file.path)), conflicts: [...conflicts.values()] };
}

/** Before sending an edit: undo the other branch's changes to these files, or keep them?
 * "undo", "overwrite" (the conflicts too), "keep" or null (cancelled).
 * @param {{files: FileAction[], conflicts: Conflict[]}} changes */
export function askOtherBranch({ files, conflicts }) {
  const choices = [{ label: "Keep the files", value: "keep" }];
  if (conflicts.length) choices.push({ label: "Undo and overwrite, then send", value: "overwrite", kind: "danger" });
  choices.push({ label: "Undo them, then send", value: "undo", kind: "primary" });
  return choose({
    title: "Undo the other branch's file changes?",
    body: undoBody("The tasks after this message changed these files. They stay on the other branch when you send this edit:", files, conflicts),
    choices,
    testid: "branch-undo-dialog",
  });
}

/** Undo tasks newest first, overwriting the paths in `overwrite`: {ok, error?, left: [task ids still undoable],
 * kept: [conflicts left as they are]}.
 * @param {Request} request errors come back as acks
 * @param {string | null} cid
 * @param {string[]} tasks
 * @param {string[]} overwrite
 * @returns {Promise<{ok: boolean, error?: import("./requests.js").ErrorBody, left: string[], kept: Conflict[]}>} */
export async function undoTasks(request, cid, tasks, overwrite) {
  /** @type {string[]} */
  const left = [];
  /** @type {Map<string, Conflict>} */
  const kept = new Map();
  for (const id of [...tasks].reverse()) {
    const ack = await request("undo_task", { conversation_id: cid, message_id: id, overwrite }, 30_000);
    if (!ack.ok) return { ok: false, error: ack.error, left: tasks, kept: [] };
    if (ack.conflicts?.length) left.push(id);
    for (const conflict of ack.conflicts ?? []) kept.set(conflict.path, conflict);
  }
  return { ok: true, left, kept: [...kept.values()] };
}
