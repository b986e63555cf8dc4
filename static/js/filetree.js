// @ts-check
// The workspace file tree, updated in place from `file_tree` change events.
import { debounce, h, icon } from "./dom.js";

const MAX_INCREMENTAL_CHANGES = 300;
const PIN_SVG = '<svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"><path d="M9 4h6l-1 6 3 3H7l3-3z"/><path d="M12 16v5"/></svg>';
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

/** @typedef {import("./events.js").FileChange} FileChange */
/** @typedef {import("./events.js").FolderRefresh} FolderRefresh */

function parentOf(path) {
  const cut = path.lastIndexOf("/");
  return cut < 0 ? "" : path.slice(0, cut);
}

function depthOf(path) {
  return path ? path.split("/").length - 1 : -1;
}

function compareNodes(a, b) {
  if (a.isDir !== b.isDir) return a.isDir ? -1 : 1;
  return collator.compare(a.name, b.name);
}

export class FileTree {
  /** load() -> Promise of the get_file_tree ack; onOpenFile(path); onRootName(name); onChange(change);
   * onFolderChange(path): a folder changed more than was listed; onFocus(path, focused): the pin of
   * a file was clicked. */
  constructor(root, { load, onOpenFile, onRootName, onChange, onFolderChange, onFocus }) {
    this.root = root;
    this.onChange = onChange;
    this.onFolderChange = onFolderChange;
    this.onFocus = onFocus;
    this.focused = new Set();
    this.load = load;
    this.onOpenFile = onOpenFile;
    this.onRootName = onRootName;
    this.nodes = new Map();
    this.expanded = new Set();
    this.selected = null;
    this.refresh = debounce(() => this.reload(), 300);
    /** @type {Map<string, string>} git's state letter of each changed file */
    this.gitMarks = new Map();
    /** @type {(() => void) | null} told after the tree was loaded or changed (the git marks follow) */
    this.onUpdated = null;
    /** @type {HTMLElement | null} said above the tree once live updates stopped */
    this.stopped = null;
  }

  /** The server's watcher ended: the tree no longer follows changes, and says so.
   * @param {string} text */
  showStopped(text) {
    this.stopped ??= h("p", { class: "empty-hint", role: "status", "data-testid": "tree-stopped" });
    this.stopped.textContent = text;
    this.root.prepend(this.stopped);
  }

  async reload() {
    let res;
    try {
      res = await this.load();
    } catch {
      return;
    }
    if (res?.ok && res.tree) this.setTree(res.tree);
    else this.root.replaceChildren(h("p", { class: "empty-hint", text: res?.error?.message ?? "The file tree is unavailable." }));
    if (res?.live_stopped) this.showStopped(res.live_stopped);
  }

  setTree(tree) {
    this.nodes.clear();
    const list = h("ul", { class: "tree" });
    const rootNode = { name: tree.name, path: "", isDir: true, children: [], list, row: null, li: null };
    this.nodes.set("", rootNode);
    for (const child of tree.children ?? []) this.#build(child, rootNode);
    this.root.replaceChildren(...(this.stopped ? [this.stopped] : []), list);
    if (!rootNode.children.length) list.append(h("li", { class: "empty-hint", text: "The workspace is empty" }));
    if (tree.truncated) {
      const shown = (tree.entries ?? rootNode.children.length).toLocaleString("en");
      const text = `Showing the first ${shown} entries: the workspace has more.`;
      this.root.append(h("p", { class: "empty-hint", "data-testid": "tree-capped", text }));
    }
    this.onRootName?.(tree.name);
    this.onUpdated?.();
  }

  #build(entry, parent) {
    const node = this.#insert(parent, entry.path, entry.is_dir, entry.annotation);
    for (const child of entry.children ?? []) this.#build(child, node);
    return node;
  }

  #createNode(path, isDir, annotation) {
    const name = path.split("/").pop();
    const row = h(
      "button",
      { type: "button", class: "tree-entry", "data-path": path, "data-type": isDir ? "dir" : "file", title: annotation ? `${path}\n${annotation}` : path },
      isDir ? icon("chevron", "tree-chevron") : h("span", { class: "tree-chevron-space" }),
      icon(isDir ? "folder" : "file", "tree-icon"),
      h("span", { class: "tree-name", text: name }),
      annotation ? h("span", { class: "tree-annotation", text: annotation }) : null,
    );
    row.style.setProperty("--depth", depthOf(path));
    this.#markGit(row, path);
    const li = h("li", { class: "tree-item" }, row);
    const node = { name, path, isDir, annotation, children: [], row, li, list: null, parent: null };
    if (!isDir && this.onFocus) li.append(this.#pin(node));
    li.append(this.#download(node));
    if (isDir) {
      node.list = h("ul", { class: "tree", role: "group" });
      li.append(node.list);
      this.#setExpanded(node, this.expanded.has(path));
    }
    row.addEventListener("click", () => (node.isDir ? this.#setExpanded(node, !this.expanded.has(node.path)) : this.onOpenFile(node.path)));
    if (path === this.selected) row.setAttribute("aria-current", "true");
    return node;
  }

  /** git's state letter of each changed file (M, A, D, ?...), shown beside its name.
   * @param {Map<string, string>} marks */
  setGitMarks(marks) {
    this.gitMarks = marks;
    for (const node of this.nodes.values()) if (node.row && !node.isDir) this.#markGit(node.row, node.path);
  }

  /** @param {HTMLElement} row @param {string} path */
  #markGit(row, path) {
    const mark = this.gitMarks.get(path);
    row.querySelector(".tree-git")?.remove();
    if (mark) row.append(h("span", { class: "tree-git", "data-testid": "tree-git", text: mark, title: "Changed since the last commit (git)" }));
    if (mark) row.dataset.git = mark;
    else delete row.dataset.git;
  }

  /** The pin that puts a file in focus (its content goes with every model call). */
  #pin(node) {
    const pin = h("button", {
      type: "button", class: "tree-pin", "data-testid": "pin-file", "aria-pressed": String(this.focused.has(node.path)),
      "aria-label": "Focus: keep this file's content in every model call", title: "Focus: keep this file's content in every model call",
      onclick: () => this.onFocus(node.path, !this.focused.has(node.path)),
    });
    pin.innerHTML = PIN_SVG;
    node.pin = pin;
    return pin;
  }

  /** A download link: the file itself, or a folder as a zip. */
  #download(node) {
    const what = node.isDir ? "this folder as a zip" : "this file";
    const link = h("a", { class: "tree-download", "data-testid": "download-entry", download: "", "aria-label": `Download ${what}`, title: `Download ${what}` }, icon("down"));
    const point = () => { link.href = `/api/download?path=${encodeURIComponent(node.path)}`; };
    point();
    link.addEventListener("click", point); // the entry may have been renamed since
    return link;
  }

  /** Open the folders down to `path` and highlight it (a file just uploaded there). */
  reveal(path) {
    for (let folder = parentOf(path); folder; folder = parentOf(folder)) {
      const node = this.nodes.get(folder);
      if (node?.isDir) this.#setExpanded(node, true);
    }
    const node = this.nodes.get(path);
    if (node) {
      this.#flash(node);
      node.row.scrollIntoView({ block: "nearest" });
    }
  }

  /** Mark the focused files' pins. */
  setFocus(paths) {
    this.focused = new Set(paths);
    for (const node of this.nodes.values()) node.pin?.setAttribute("aria-pressed", String(this.focused.has(node.path)));
  }

  #setExpanded(node, open) {
    if (open) this.expanded.add(node.path);
    else this.expanded.delete(node.path);
    node.row.setAttribute("aria-expanded", String(open));
    node.list.hidden = !open;
  }

  #insert(parent, path, isDir, annotation) {
    const node = this.#createNode(path, isDir, annotation);
    this.#attach(parent, node);
    return node;
  }

  #attach(parent, node) {
    node.parent = parent;
    const after = parent.children.find((other) => compareNodes(node, other) < 0);
    parent.list.insertBefore(node.li, after?.li ?? null);
    parent.children.splice(after ? parent.children.indexOf(after) : parent.children.length, 0, node);
    parent.list.querySelector(":scope > .empty-hint")?.remove();
    this.nodes.set(node.path, node);
  }

  #detach(node) {
    const siblings = node.parent.children;
    siblings.splice(siblings.indexOf(node), 1);
    node.li.remove();
    this.#forEach(node, (n) => this.nodes.delete(n.path));
  }

  #forEach(node, fn) {
    fn(node);
    for (const child of node.children) this.#forEach(child, fn);
  }

  #ensureDir(path) {
    const existing = this.nodes.get(path);
    if (existing) return existing.isDir ? existing : null;
    const parent = this.#ensureDir(parentOf(path));
    return parent ? this.#insert(parent, path, true) : null;
  }

  /** Apply change events; anything surprising, or a folder to refresh, falls back to a (debounced) full reload.
   * @param {FileChange[]} changes
   * @param {FolderRefresh[]} [refresh] */
  apply(changes, refresh = []) {
    this.onUpdated?.();
    for (const change of changes) this.onChange?.(change);
    for (const folder of refresh) this.onFolderChange?.(folder.path);
    if (!this.nodes.size) return;
    // A changed .gitignore changes what the whole tree shows.
    const rules = changes.some((change) => [change?.path, change?.dest_path].some((p) => /(^|\/)\.gitignore$/.test(p ?? "")));
    if (refresh.length || rules || changes.length > MAX_INCREMENTAL_CHANGES) return void this.refresh();
    for (const change of changes) {
      if (change?.path === "") continue;
      if (!change?.path || !this.#applyOne(change)) this.refresh();
    }
  }

  /** @param {Pick<FileChange, "event" | "path" | "is_dir"> & {dest_path?: string | null}} change */
  #applyOne({ event, path, dest_path: destPath, is_dir: isDir }) {
    const existing = this.nodes.get(path);
    if (event === "deleted") {
      if (existing && path) this.#detach(existing);
      return true;
    }
    if (event === "moved") {
      if (!destPath) return false;
      if (!existing) return this.#applyOne({ event: "created", path: destPath, is_dir: isDir });
      const parent = this.#ensureDir(parentOf(destPath));
      if (!parent || this.nodes.has(destPath)) return false;
      this.#detach(existing);
      this.#rename(existing, path, destPath);
      this.#attach(parent, existing);
      this.#forEach(existing, (n) => this.nodes.set(n.path, n));
      this.#flash(existing);
      return true;
    }
    if (existing) {
      if (existing.isDir !== Boolean(isDir)) return false;
      if (path) this.#flash(existing);
      return true;
    }
    const parent = this.#ensureDir(parentOf(path));
    if (!parent) return false;
    this.#flash(this.#insert(parent, path, Boolean(isDir)));
    return true;
  }

  #rename(node, from, to) {
    this.#forEach(node, (n) => {
      const expanded = this.expanded.delete(n.path);
      n.path = to + n.path.slice(from.length);
      if (expanded) this.expanded.add(n.path);
      n.row.dataset.path = n.path;
      n.row.title = n.path;
      n.row.style.setProperty("--depth", depthOf(n.path));
    });
    node.name = to.split("/").pop();
    node.row.querySelector(".tree-name").textContent = node.name;
  }

  /** Highlight a changed entry, or its nearest visible folder when it is collapsed away. */
  #flash(node) {
    let target = node;
    for (let up = node.parent; up && up.path; up = up.parent) {
      if (!this.expanded.has(up.path)) target = up;
    }
    const row = target.row;
    row.classList.remove("flash");
    void row.offsetWidth;
    row.classList.add("flash");
    row.addEventListener("animationend", () => row.classList.remove("flash"), { once: true });
  }

  select(path) {
    this.selected = path;
    for (const row of this.root.querySelectorAll('.tree-entry[aria-current="true"]')) row.removeAttribute("aria-current");
    this.nodes.get(path ?? "")?.row?.setAttribute("aria-current", "true");
  }

  has(path) {
    return this.nodes.has(path);
  }
}
