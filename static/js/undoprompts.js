// The questions asked before undoing, from the server's undo_preview: before "Undo this task", and before
// an edit leaves on another branch tasks that changed files (undo those changes first, or keep them).
import { choose, fileList, UNDO_VERBS } from "./dialog.js";
import { h } from "./dom.js";

/** List what undoing the task will remove and restore, and ask; true: go ahead (also when there is nothing to list). */
export async function askUndoTask(request, cid, messageId) {
  const preview = await request("undo_preview", { conversation_id: cid, message_id: messageId });
  if (!preview.ok || !preview.files?.length) return true; // the undo itself says what there is
  const answer = await choose({
    title: "Undo this task?",
    body: [h("p", { text: "These files go back to how they were before the task:" }), fileList(preview.files, UNDO_VERBS)],
    choices: [{ label: "Undo", value: "undo", kind: "danger" }],
    testid: "undo-dialog",
  });
  return answer === "undo";
}

/** The files the tasks (oldest first) changed and could still undo: [{path, action}]. */
export async function undoableChanges(request, cid, tasks) {
  const previews = await Promise.all(tasks.map((id) => request("undo_preview", { conversation_id: cid, message_id: id })));
  const byPath = new Map(); // the oldest task's action wins: undoing them all ends where it began
  for (const preview of previews) for (const file of preview.ok ? preview.files ?? [] : []) if (!byPath.has(file.path)) byPath.set(file.path, file);
  return [...byPath.values()];
}

/** Before sending an edit: undo the other branch's changes to these files, or keep them? "undo", "keep" or null (cancelled). */
export function askOtherBranch(files) {
  return choose({
    title: "Undo the other branch's file changes?",
    body: [h("p", { text: "The tasks after this message changed these files. They stay on the other branch when you send this edit:" }),
      fileList(files, UNDO_VERBS)],
    choices: [{ label: "Keep the files", value: "keep" }, { label: "Undo them, then send", value: "undo", kind: "primary" }],
    testid: "branch-undo-dialog",
  });
}
