// @ts-check
// The open conversation's focus files: pinned for every model call (at most three), shown in the file tree and
// the status bar. A conversation not started yet keeps them here and sends them with its first message.

/** @typedef {import("./requests.js").Request} Request */

const MAX_FOCUS = 3;

export class FocusFiles {
  /** @param {{request: Request, cid: () => string | null, tree: import("./filetree.js").FileTree,
   *   statusBar: import("./statusbar.js").StatusBar, showError: (message: string) => void}} parts */
  constructor({ request, cid, tree, statusBar, showError }) {
    this.request = request;
    this.cid = cid;
    this.tree = tree;
    this.statusBar = statusBar;
    this.showError = showError;
    /** @type {string[]} */
    this.paths = [];
  }

  /** The focus files, as the server says (or none, for a new conversation).
   * @param {string[]} paths */
  show(paths) {
    this.paths = paths;
    this.tree.setFocus(paths);
    this.statusBar.setFocus(paths, (path) => this.set(path, false));
  }

  /** Pin a file for every model call of the open conversation, or unpin it.
   * @param {string} path
   * @param {boolean} focused */
  async set(path, focused) {
    const cid = this.cid();
    if (!cid) {
      if (focused && this.paths.length >= MAX_FOCUS) return void this.showError("At most three files can be in focus: unpin one first.");
      this.show(focused ? [...new Set([...this.paths, path])] : this.paths.filter((p) => p !== path));
      return;
    }
    const ack = await this.request(focused ? "focus_file" : "unfocus_file", { conversation_id: cid, path });
    if (this.cid() !== cid) return;
    if (ack.ok) this.show(ack.focus ?? []);
    else this.showError(`Could not ${focused ? "focus" : "unfocus"} ${path}: ${ack.error?.message ?? "unknown error"}`);
  }
}
