// @ts-check
// `@` in the message box completes a workspace path from the file tree the page holds: `@` and a few letters list
// the files whose path holds them (names that start with them first); ↑/↓ move, Enter/Tab pick, Esc closes, the
// mouse picks too. A picked path is written into the message as `@path ` and put in focus (focusfiles.js).
import { h } from "./dom.js";

const AT_WORD = /(?:^|\s)@([^\s@]*)$/; // the text up to the caret, while a path is typed after `@`
const MAX_SHOWN = 8;

/** The paths holding `query` (case-insensitive), those whose file name starts with it first, then the shorter.
 * @param {string[]} paths
 * @param {string} query */
export function matchPaths(paths, query) {
  const wanted = query.toLowerCase();
  const rank = (/** @type {string} */ path) => {
    const lower = path.toLowerCase();
    const name = lower.slice(lower.lastIndexOf("/") + 1);
    if (name.startsWith(wanted)) return 0;
    if (lower.startsWith(wanted)) return 1;
    return lower.includes(wanted) ? 2 : -1;
  };
  return paths
    .map((path) => ({ path, rank: rank(path) }))
    .filter((match) => match.rank >= 0)
    .sort((a, b) => a.rank - b.rank || a.path.length - b.path.length || a.path.localeCompare(b.path))
    .slice(0, MAX_SHOWN)
    .map((match) => match.path);
}

export class PathCompleter {
  /** @param {HTMLTextAreaElement} input
   * @param {{paths: () => string[], onPick: (path: string) => void}} options */
  constructor(input, { paths, onPick }) {
    this.input = input;
    this.options = { paths, onPick };
    this.list = h("ul", { class: "command-menu path-menu", "data-testid": "path-menu", role: "listbox", "aria-label": "Workspace files", hidden: true });
    input.after(this.list);
    /** @type {string[]} */
    this.shown = [];
    this.active = -1;
    input.addEventListener("input", () => this.update());
    input.addEventListener("blur", () => this.close());
    input.addEventListener("keydown", (event) => this.#onKey(event), true); // before the composer's Enter
  }

  get isOpen() {
    return !this.list.hidden;
  }

  /** Open, filter or close the list for the text before the caret. */
  update() {
    const before = this.input.value.slice(0, this.input.selectionStart ?? this.input.value.length);
    const typed = AT_WORD.exec(before);
    this.shown = typed ? matchPaths(this.options.paths(), typed[1]) : [];
    if (!this.shown.length) return void this.close();
    this.list.replaceChildren(...this.shown.map((path, i) => h("li", {
      class: "command-option", role: "option", id: `path-option-${i}`, "data-path": path,
      onmousedown: (/** @type {MouseEvent} */ event) => {
        event.preventDefault(); // the box keeps the focus
        this.#pick(path);
      },
    }, h("span", { class: "command-name", text: path }))));
    this.list.hidden = false;
    this.#activate(0);
  }

  close() {
    this.list.hidden = true;
    this.list.replaceChildren();
    this.shown = [];
    this.active = -1;
  }

  /** @param {number} index */
  #activate(index) {
    this.active = index;
    [...this.list.children].forEach((el, i) => el.setAttribute("aria-selected", String(i === index)));
    this.list.children[index]?.scrollIntoView({ block: "nearest" });
  }

  /** @param {KeyboardEvent} event */
  #onKey(event) {
    if (!this.isOpen || event.isComposing) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const step = event.key === "ArrowDown" ? 1 : -1;
      this.#activate((this.active + step + this.shown.length) % this.shown.length);
    } else if ((event.key === "Enter" || event.key === "Tab") && !event.shiftKey) {
      this.#pick(this.shown[this.active]);
    } else if (event.key === "Escape") {
      this.close();
    } else {
      return;
    }
    event.preventDefault();
    event.stopImmediatePropagation();
  }

  /** Write `@path ` in place of what was typed after `@`, and focus the file.
   * @param {string} path */
  #pick(path) {
    const caret = this.input.selectionStart ?? this.input.value.length;
    const before = this.input.value.slice(0, caret).replace(/@[^\s@]*$/, `@${path} `);
    this.input.value = before + this.input.value.slice(caret);
    this.input.setSelectionRange(before.length, before.length);
    this.close();
    this.input.dispatchEvent(new Event("input", { bubbles: true })); // the composer sees the new text
    this.options.onPick(path);
  }
}
