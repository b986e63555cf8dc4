// @ts-check
// Both versions of a file that changed on disk while it had unsaved edits: theirs (what is on disk now, read-only)
// on the left, mine (the unsaved text, still editable) on the right, the differences marked (CodeMirror's merge
// view). Nothing of mine is dropped until the person chooses: save mine over theirs, take theirs, or copy mine.
import { copyText, h } from "./dom.js";
import { editorExtensions } from "./editorsetup.js";

/** @typedef {import("./editor.js").OpenedFile} OpenedFile */

export class ConflictView {
  /** @param {HTMLElement} parent
   * @param {any} cm  the CodeMirror bundle
   * @param {{path: string, theirs: OpenedFile | null, mine: string, keepMine: (text: string) => Promise<boolean>,
   *   takeTheirs: () => void}} options */
  constructor(parent, cm, { path, theirs, mine, keepMine, takeTheirs }) {
    this.theirsVersion = theirs?.version ?? null;
    const theirsText = theirs?.content ?? "";
    const side = (/** @type {string} */ text, /** @type {boolean} */ readOnly) => ({
      doc: text,
      extensions: editorExtensions(cm, { path, text, readOnly, onSave: () => {}, onChange: () => {} }),
    });
    const frame = h("div", { class: "conflict-merge", "data-testid": "editor-conflict" });
    const labels = h("div", { class: "conflict-labels" },
      h("span", { text: theirs ? "On disk now (the agent's)" : "Deleted on disk" }), h("span", { text: "Yours (unsaved)" }));
    const status = h("span", { class: "conflict-status", role: "status", "data-testid": "conflict-status" });
    const button = (/** @type {string} */ label, /** @type {string} */ testid, /** @type {() => unknown} */ run, kind = "") =>
      h("button", { type: "button", class: `btn btn-sm ${kind}`.trim(), "data-testid": testid, onclick: run }, label);
    const actions = h("div", { class: "conflict-actions" },
      button(theirs ? "Save mine over theirs" : "Save mine again", "conflict-keep-mine", () => keepMine(this.mine()), "btn-primary"),
      button(theirs ? "Take theirs" : "Close", "conflict-take-theirs", takeTheirs),
      button("Copy mine", "conflict-copy-mine", async () => {
        status.textContent = (await copyText(this.mine())) ? "Copied." : "Could not copy.";
      }),
      status);
    parent.append(actions, labels, frame);
    this.merge = new cm.MergeView({ a: side(theirsText, true), b: side(mine, false), parent: frame });
  }

  /** The person's text as it is now (they may have edited it here). */
  mine() {
    return this.merge.b.state.doc.toString();
  }

  destroy() {
    this.merge.destroy();
  }
}
