// @ts-check
// The Changes panel's git view, when the workspace is a git repository: the work tree's status (staged and not),
// a diff per file, stage and unstage, and a commit with a message (the agent can be asked to propose one).
import { renderDiff } from "./diffview.js";
import { h } from "./dom.js";

/** @typedef {import("./requests.js").Request} Request */
/** @typedef {{path: string, index: string, worktree: string, from?: string}} GitFile */
/** @typedef {{ok: boolean, repository?: boolean, branch?: string | null, head?: string | null, files?: GitFile[],
 *   error?: {message: string}}} GitStatus */

const STATE_TEXT = { M: "modified", A: "added", D: "deleted", R: "renamed", C: "copied", T: "type changed", U: "conflict", "?": "new" };
const PROPOSE = "Propose a commit message for the staged changes (`git diff --cached`): a short summary line, a blank line, "
  + "then why. Only answer with the message; do not commit.";

/** The letter a file's tree mark shows: its work-tree state, else its staged one.
 * @param {GitFile} file */
export function markOf(file) {
  return file.worktree !== "." ? file.worktree : file.index;
}

export class GitView {
  /** @param {{request: Request, onStatus: (status: GitStatus) => void, onAsk: (text: string) => void}} options */
  constructor({ request, onStatus, onAsk }) {
    this.request = request;
    this.onStatus = onStatus;
    this.onAsk = onAsk;
    this.message = /** @type {HTMLTextAreaElement} */ (h("textarea", {
      class: "git-message", rows: 3, maxlength: 10000, "data-testid": "git-message", "aria-label": "Commit message",
      placeholder: "Commit message",
    }));
    this.error = h("p", { class: "changes-error", role: "alert", "data-testid": "git-error", hidden: true });
    this.files = h("div", { class: "git-files", "data-testid": "git-files" });
    this.diff = h("div", { class: "git-diff", "data-testid": "git-diff" });
    this.root = h("div", { class: "git-view", "data-testid": "git-view" }, this.error, this.files, this.#commitForm(), this.diff);
  }

  #commitForm() {
    const commit = h("button", { type: "button", class: "btn btn-sm btn-primary", "data-testid": "git-commit", onclick: () => this.commit() }, "Commit");
    const ask = h("button", {
      type: "button", class: "btn btn-sm", "data-testid": "git-propose", title: "Put a request for a commit message in the message box (not sent)",
      onclick: () => this.onAsk(PROPOSE),
    }, "Ask the agent for a message");
    return h("div", { class: "git-commit-form" }, this.message, h("div", { class: "git-commit-bar" }, ask, commit));
  }

  /** Read the status again and show it. */
  async refresh() {
    /** @type {GitStatus} */
    const status = await this.request("git_status", {});
    this.onStatus(status);
    if (!status.ok) return this.#fail(status.error?.message ?? "git status failed");
    this.#renderFiles(status.files ?? []);
  }

  /** @param {GitFile[]} files */
  #renderFiles(files) {
    const staged = files.filter((f) => f.index !== "." && f.index !== "?");
    const changed = files.filter((f) => f.worktree !== ".");
    this.files.replaceChildren(
      this.#group("Staged", staged, true),
      this.#group("Not staged", changed, false),
    );
    if (!files.length) this.files.replaceChildren(h("p", { class: "empty-hint", text: "Nothing changed since the last commit." }));
  }

  /** @param {string} title @param {GitFile[]} files @param {boolean} staged */
  #group(title, files, staged) {
    const list = h("ul", { class: "git-list", "data-testid": staged ? "git-staged" : "git-unstaged" });
    for (const file of files) {
      const state = staged ? file.index : file.worktree;
      const act = h("button", {
        type: "button", class: "btn btn-sm", "data-testid": staged ? "git-unstage" : "git-stage",
        onclick: () => this.#stage(file.path, !staged),
      }, staged ? "Unstage" : "Stage");
      const name = h("button", { type: "button", class: "git-path", "data-path": file.path, onclick: () => this.showDiff(file.path, staged) },
        h("span", { class: `git-state git-${state === "?" ? "new" : state}`, text: state, title: STATE_TEXT[state] ?? state }),
        h("code", { text: file.from ? `${file.from} → ${file.path}` : file.path }));
      list.append(h("li", { "data-path": file.path }, name, act));
    }
    return h("section", { class: "git-group" }, h("h3", { class: "changes-heading", text: `${title} (${files.length})` }), list);
  }

  /** Show the diff of one path (or all), staged or not.
   * @param {string | null} path @param {boolean} staged */
  async showDiff(path, staged) {
    const ack = await this.request("git_diff", path ? { path, staged } : { staged });
    if (!ack.ok) return this.#fail(ack.error?.message ?? "git diff failed");
    const text = ack.diff || (path ? "No difference to show (a new file is shown once staged)." : "No difference.");
    this.diff.replaceChildren(
      h("h3", { class: "changes-heading", text: `${staged ? "Staged" : "Not staged"}: ${path ?? "all files"}` }),
      ack.diff ? renderDiff(ack.diff) : h("p", { class: "empty-hint", text }),
    );
    this.diff.dataset.path = path ?? "";
    this.diff.dataset.staged = String(staged);
  }

  /** @param {string} path @param {boolean} stage */
  async #stage(path, stage) {
    const ack = await this.request(stage ? "git_stage" : "git_unstage", { paths: [path] });
    if (!ack.ok) this.#fail(ack.error?.message ?? "failed");
    await this.refresh();
  }

  async commit() {
    const message = this.message.value.trim();
    if (!message) return this.#fail("Write a commit message first.");
    const ack = await this.request("git_commit", { message }, 30_000);
    if (!ack.ok) return this.#fail(ack.error?.message ?? "The commit failed.");
    this.message.value = "";
    this.error.hidden = true;
    this.diff.replaceChildren(h("p", { class: "changes-note", "data-testid": "git-committed", text: `Committed ${ack.commit.slice(0, 10)}: ${ack.summary}` }));
    await this.refresh();
  }

  /** @param {string} text */
  #fail(text) {
    this.error.textContent = text;
    this.error.hidden = false;
  }
}
