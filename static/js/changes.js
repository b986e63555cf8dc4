// @ts-check
// The Changes panel: what the open conversation's tasks changed (a diff per file, by task, from the undo journals),
// the sum since the conversation began, and, when the workspace is a git repository, its status, stage and commit.
// It also keeps the tree's git marks and the status bar's branch current.
import { renderDiff } from "./diffview.js";
import { debounce, h } from "./dom.js";
import { GitView, markOf } from "./changesgit.js";

/** @typedef {import("./requests.js").Request} Request */
/** @typedef {{path: string, status: string, diff: string | null, note: string | null}} ChangedFile */
/** @typedef {{message_id: string, undone: boolean, files: ChangedFile[]}} TaskChanges */

const TABS = [["tasks", "By task"], ["since", "Since the start"], ["git", "Git"]];

/** One file's change: its path and status, then its diff or why there is none.
 * @param {ChangedFile} file */
export function renderChangedFile(file) {
  const body = file.diff ? renderDiff(file.diff) : h("p", { class: "changes-note", text: file.note ?? "No difference in content." });
  return h("details", { class: "changed-file", open: true, "data-path": file.path, "data-testid": "changed-file" },
    h("summary", {}, h("code", { text: file.path }), h("span", { class: `changed-status changed-${file.status}`, text: file.status })),
    body);
}

export class ChangesPanel {
  /** @param {HTMLElement} root the panel
   * @param {{request: Request, toggle: HTMLElement, onAsk: (text: string) => void,
   *   onMarks: (marks: Map<string, string>) => void, onBranch: (branch: string | null) => void}} options */
  constructor(root, options) {
    const { request, toggle, onAsk } = options;
    this.root = root;
    this.options = options;
    /** @type {string | null} */
    this.cid = null;
    this.tab = "tasks";
    this.body = h("div", { class: "changes-body", "data-testid": "changes-body" });
    this.git = new GitView({ request, onAsk, onStatus: (status) => this.#gitStatus(status) });
    this.tabs = h("div", { class: "changes-tabs", role: "tablist" }, TABS.map(([id, label]) => h("button", {
      type: "button", role: "tab", class: "changes-tab", "data-tab": id, "data-testid": `changes-tab-${id}`,
      "aria-selected": String(id === this.tab), onclick: () => this.select(id),
    }, label)));
    const close = h("button", { type: "button", class: "btn-ghost btn-sm", "aria-label": "Hide the changes", onclick: () => this.setOpen(false) }, "Hide");
    root.replaceChildren(h("header", { class: "changes-head" }, this.tabs, close), this.body);
    toggle.addEventListener("click", () => this.setOpen(root.hidden));
    this.refreshGit = debounce(() => this.#refreshGit(), 500);
    this.rerender = debounce(() => this.render(), 500);
  }

  /** The open conversation (null: none yet).
   * @param {string | null} cid */
  show(cid) {
    this.cid = cid;
    if (!this.root.hidden) this.render();
  }

  /** @param {boolean} open */
  setOpen(open) {
    this.root.hidden = !open;
    this.options.toggle.setAttribute("aria-pressed", String(open));
    if (open) this.render();
  }

  /** @param {string} tab */
  select(tab) {
    this.tab = tab;
    for (const button of this.tabs.querySelectorAll("[data-tab]")) button.setAttribute("aria-selected", String(button.getAttribute("data-tab") === tab));
    this.render();
  }

  /** Fill the open tab from the server. */
  async render() {
    if (this.tab === "git") {
      this.body.replaceChildren(this.git.root);
      await this.git.refresh();
      return;
    }
    if (!this.cid) {
      this.body.replaceChildren(h("p", { class: "empty-hint", text: "No conversation yet: its tasks' changes show here." }));
      return;
    }
    const ack = await this.options.request("changes", { conversation_id: this.cid });
    if (!ack.ok) {
      this.body.replaceChildren(h("p", { class: "changes-error", role: "alert", text: ack.error?.message ?? "The changes are unavailable." }));
      return;
    }
    this.body.replaceChildren(this.tab === "tasks" ? this.#tasks(ack.tasks) : this.#files(ack.since_start, "Nothing changed since the conversation began."));
  }

  /** @param {TaskChanges[]} tasks */
  #tasks(tasks) {
    if (!tasks.length) return h("p", { class: "empty-hint", text: "No task of this conversation changed a file." });
    return h("div", {}, tasks.map((task, n) => h("section", { class: "changes-task", "data-message-id": task.message_id, "data-testid": "changes-task" },
      h("h3", { class: "changes-heading", text: `Task ${n + 1}${task.undone ? " (undone)" : ""}` }),
      this.#files(task.files, "It left every file as it found it."))));
  }

  /** @param {ChangedFile[]} files @param {string} empty */
  #files(files, empty) {
    if (!files.length) return h("p", { class: "empty-hint", text: empty });
    return h("div", { class: "changed-files" }, files.map(renderChangedFile));
  }

  /** Something in the workspace changed: the tree's marks and the branch follow, and an open view. */
  changed() {
    this.refreshGit();
    if (!this.root.hidden && this.tab !== "git") this.rerender();
  }

  async #refreshGit() {
    if (!this.root.hidden && this.tab === "git") await this.git.refresh();
    else this.#gitStatus(await this.options.request("git_status", {}));
  }

  /** @param {import("./changesgit.js").GitStatus} status */
  #gitStatus(status) {
    const repository = Boolean(status.ok && status.repository);
    const gitTab = /** @type {HTMLElement} */ (this.tabs.querySelector("[data-tab=git]"));
    gitTab.hidden = !repository;
    this.options.onBranch(repository ? status.branch ?? "(detached)" : null);
    this.options.onMarks(new Map(repository ? (status.files ?? []).map((file) => [file.path, markOf(file)]) : []));
  }
}
