// @ts-check
// A modal question with a few answers (a native <dialog>): confirmations before deleting or undoing.
import { h } from "./dom.js";

/** Ask and resolve with the chosen answer's value, or null when dismissed (Esc, Cancel).
 * choices: [{label, value, kind: "primary" | "danger" | undefined}] after the cancel button; the last is focused. */
export function choose({ title, body = [], choices, testid = "dialog", cancelLabel = "Cancel" }) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "ask-dialog", "data-testid": testid, "aria-labelledby": `${testid}-title` });
    const finish = (value) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const buttons = [h("button", { type: "button", class: "btn", "data-value": "", onclick: () => finish(null) }, cancelLabel)];
    for (const choice of choices) {
      const kind = choice.kind ? ` btn-${choice.kind}` : "";
      buttons.push(h("button", { type: "button", class: `btn${kind}`, "data-value": choice.value, onclick: () => finish(choice.value) }, choice.label));
    }
    dialog.append(
      h("h2", { class: "ask-title", id: `${testid}-title`, text: title }),
      h("div", { class: "ask-body" }, body),
      h("div", { class: "ask-actions" }, buttons),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(null);
    });
    document.body.append(dialog);
    dialog.showModal();
    buttons.at(-1).focus();
  });
}

/** A list of paths with what happens to each: [{path, action}] -> <ul>. */
export function fileList(files, verbs) {
  return h("ul", { class: "ask-files" }, files.map(({ path, action }) =>
    h("li", { "data-action": action }, h("code", { text: path }), h("span", { class: "ask-verb", text: verbs[action] ?? action }))));
}

export const UNDO_VERBS = { remove: "will be removed", restore: "will be restored", lost: "cannot be restored" };
