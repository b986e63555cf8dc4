// @ts-check
// The page's editor (CodeMirror 6) on a workspace file: opened with its version (open_file), saved with Ctrl/Cmd-S
// or the Save button over that version (save_file). A file that changes on disk while open (the agent wrote it)
// reloads when nothing is unsaved; with unsaved edits, or when a save finds a newer file, both versions show side by
// side (editorconflict.js) and the person's text stays until they choose. Binary and very large files open
// read-only, saying why.
import { choose } from "./dialog.js";
import { formatBytes, h, icon } from "./dom.js";
import { ConflictView } from "./editorconflict.js";
import { editorExtensions, loadCodeMirror } from "./editorsetup.js";

/** @typedef {import("./requests.js").OpenedFile} OpenedFile */
/** @typedef {import("./requests.js").Request} Request */

export class FileEditor {
  /** @param {HTMLElement} panel  the editor's <aside>, empty
   * @param {{request: Request, onClose?: () => void}} options */
  constructor(panel, { request, onClose }) {
    this.panel = panel;
    this.request = request;
    this.onClose = onClose;
    /** @type {OpenedFile | null} */
    this.file = null;
    /** @type {any} */
    this.view = null;
    /** @type {ConflictView | null} */
    this.conflict = null;
    this.cm = null;
    this.dirty = false;
    this.quiet = false; // set while the page itself replaces the text
    this.#build();
  }

  #build() {
    this.title = h("span", { class: "preview-path", "data-role": "path" });
    this.meta = h("span", { class: "preview-meta", "data-role": "meta", "data-testid": "editor-meta" });
    this.saveButton = h("button", { type: "button", class: "btn btn-sm btn-primary", "data-testid": "editor-save", title: "Save (Ctrl+S)", disabled: true, onclick: () => this.save() }, "Save");
    const search = h("button", { type: "button", class: "btn btn-sm", "data-testid": "editor-search", title: "Find and replace (Ctrl+F)", onclick: () => this.view && this.cm.openSearchPanel(this.view) }, "Find");
    const close = h("button", { type: "button", class: "btn-ghost btn-icon", "aria-label": "Close the editor", title: "Close (Esc)", onclick: () => this.close() }, icon("close"));
    this.notice = h("div", { class: "preview-notice editor-notice", role: "status", "data-testid": "editor-notice", hidden: true });
    this.body = h("div", { class: "editor-body", "data-testid": "editor-body" });
    this.panel.append(h("header", { class: "preview-head" }, this.title, this.meta, search, this.saveButton, close), this.notice, this.body);
    this.panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      event.stopPropagation();
      this.close();
    });
  }

  get isOpen() {
    return !this.panel.hidden;
  }

  get path() {
    return this.file?.path ?? null;
  }

  /** Open a workspace file; false when the person kept unsaved edits of another one instead.
   * @param {string} path */
  async open(path) {
    if (this.isOpen && path === this.path) return true;
    if (this.isOpen && this.dirty && !(await this.#discardAsked())) return false;
    this.panel.hidden = false;
    this.title.textContent = this.title.title = path;
    this.#say(null);
    this.body.replaceChildren(h("div", { class: "loading" }, h("span", { class: "spinner" }), "Loading…"));
    const [cm, ack] = await Promise.all([loadCodeMirror(), this.request("open_file", { path })]);
    this.cm = cm;
    if (!ack.ok) {
      this.#destroy();
      this.file = null;
      this.body.replaceChildren(h("div", { class: "preview-message error" }, icon("alert"), ack.error?.message ?? "Could not open the file."));
      return true;
    }
    this.#show(ack.file);
    this.view?.focus();
    return true;
  }

  /** Show `file` in a fresh editor, its text the saved one.
   * @param {OpenedFile} file */
  #show(file) {
    this.#destroy();
    this.file = file;
    const readOnly = Boolean(file.read_only);
    this.view = new this.cm.EditorView({
      parent: this.body,
      doc: file.content ?? "",
      extensions: editorExtensions(this.cm, {
        path: file.path, text: file.content ?? "", readOnly, onSave: () => this.save(), onChange: () => this.#edited(),
      }),
    });
    this.#say(file.read_only ? `Read-only: ${file.read_only}.` : null);
    this.#setDirty(false);
  }

  #destroy() {
    this.conflict?.destroy();
    this.conflict = null;
    this.view?.destroy();
    this.view = null;
    this.body.replaceChildren();
  }

  #edited() {
    if (!this.quiet) this.#setDirty(true);
  }

  /** @param {boolean} dirty */
  #setDirty(dirty) {
    this.dirty = dirty;
    this.panel.dataset.dirty = String(dirty);
    this.panel.dataset.version = this.file?.version ?? "";
    this.saveButton.disabled = !dirty || !this.file || Boolean(this.file.read_only) || Boolean(this.conflict);
    const size = this.file ? formatBytes(this.file.size) : "";
    this.meta.textContent = dirty ? `${size} · unsaved` : size;
  }

  /** @param {string | null} text */
  #say(text) {
    this.notice.hidden = !text;
    this.notice.textContent = text ?? "";
  }

  /** Save the text over the version it was edited from: a newer file on disk shows both instead. */
  async save(confirmed = false) {
    if (!this.file || !this.view || this.file.read_only || this.conflict) return;
    const content = this.view.state.doc.toString();
    const payload = { path: this.file.path, content, base_version: this.file.version, confirmed };
    await this.#write(payload, content);
  }

  /** Send a save; answer it: saved, a conflict, or a question first (the agent's own configuration).
   * @param {{path: string, content: string, base_version: string | null, confirmed: boolean}} payload
   * @param {string} content */
  async #write(payload, content) {
    this.saveButton.disabled = true;
    const ack = await this.request("save_file", payload);
    if (ack.ok) {
      const edited = this.view ? this.view.state.doc.toString() !== content : false; // typed while saving
      if (this.conflict) this.#show(ack.file);
      else this.file = ack.file;
      this.#setDirty(edited);
      this.#say(null);
      return true;
    }
    if (ack.error?.code === "conflict") {
      this.#showConflict(ack.current, content);
    } else if (ack.needs_confirmation && !payload.confirmed && (await this.#configAsked(ack.error.message))) {
      return this.#write({ ...payload, confirmed: true }, content);
    } else {
      this.#say(`Not saved: ${ack.error?.message ?? "unknown error"}`);
      this.#setDirty(this.dirty);
    }
    return false;
  }

  /** Theirs (on disk) beside mine (this text), until the person chooses.
   * @param {OpenedFile | null} current
   * @param {string} mine */
  #showConflict(current, mine) {
    const file = this.file;
    if (!file) return;
    this.#destroy();
    this.conflict = new ConflictView(this.body, this.cm, {
      path: file.path, theirs: current, mine,
      keepMine: (text) => this.#write({ path: file.path, content: text, base_version: current?.version ?? null, confirmed: false }, text),
      takeTheirs: () => (current ? this.#show(current) : this.close(true)),
    });
    this.#say(current ? "The file changed on disk since you opened it: yours is on the right, unsaved." : "The file was deleted on disk: yours is on the right, unsaved.");
    this.#setDirty(true);
  }

  /** The file changed on disk (a file_tree change): reload it, or show both when there are unsaved edits.
   * @param {string} path
   * @param {string} event
   * @param {string | null | undefined} destPath */
  changed(path, event, destPath) {
    if (!this.isOpen || path !== this.path) return;
    if (event === "moved" && destPath && !this.dirty && !this.conflict) void this.open(destPath);
    else void this.#refresh();
  }

  async #refresh() {
    const path = this.path;
    if (!path) return;
    const ack = await this.request("open_file", { path });
    if (path !== this.path) return;
    const current = ack.ok ? ack.file : null;
    const known = this.conflict ? this.conflict.theirsVersion : this.file?.version;
    if ((current?.version ?? null) === known && (current || this.conflict)) return; // our own save, or no change
    if (this.conflict) return void this.#showConflict(current, this.conflict.mine());
    if (this.dirty) return void this.#showConflict(current, this.view.state.doc.toString());
    if (!current) return void this.#say("This file was deleted on disk.");
    this.#reload(current);
  }

  /** Put the file's new text in place, the caret kept where it was (as near as the text allows).
   * @param {OpenedFile} current */
  #reload(current) {
    if (current.read_only) return void this.#show(current);
    const head = Math.min(this.view.state.selection.main.head, (current.content ?? "").length);
    this.quiet = true;
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: current.content ?? "" }, selection: { anchor: head } });
    this.quiet = false;
    this.file = current;
    this.#setDirty(false);
    this.#say("Reloaded: the file changed on disk.");
  }

  async #discardAsked() {
    const answer = await choose({
      title: "Discard unsaved changes?", testid: "editor-discard",
      body: [h("p", { text: `${this.path} has changes that are not saved.` })],
      choices: [{ label: "Discard", value: "discard", kind: "danger" }],
    });
    return answer === "discard";
  }

  /** @param {string} why */
  async #configAsked(why) {
    const answer = await choose({
      title: "Save Workspace Agent's configuration?", testid: "editor-config",
      body: [h("p", { text: why })], choices: [{ label: "Save", value: "save", kind: "primary" }],
    });
    return answer === "save";
  }

  /** Close; unsaved edits are asked about first (unless `force`). */
  async close(force = false) {
    if (!force && this.dirty && !(await this.#discardAsked())) return;
    this.#destroy();
    this.file = null;
    this.#setDirty(false);
    this.panel.hidden = true;
    this.onClose?.();
  }
}
