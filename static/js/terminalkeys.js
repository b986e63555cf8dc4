// @ts-check
// The key row under the terminal on a phone, for the keys its keyboard lacks: Ctrl (sticky: it applies to the
// next key typed, on the row or on the keyboard), Esc, Tab and the arrows.
import { h } from "./dom.js";

/** @typedef {"A" | "B" | "C" | "D"} Arrow */

/** @type {Array<{label: string, name: string, data?: string, arrow?: Arrow}>} */
const KEYS = [
  { label: "Esc", name: "Escape", data: "\x1b" }, { label: "Tab", name: "Tab", data: "\t" },
  { label: "←", name: "Left", arrow: "D" }, { label: "↑", name: "Up", arrow: "A" },
  { label: "↓", name: "Down", arrow: "B" }, { label: "→", name: "Right", arrow: "C" },
];

/** The control character Ctrl and `key` make, or null when there is none.
 * @param {string} key */
function controlOf(key) {
  if (key === "?") return "\x7f";
  const code = key.toUpperCase().charCodeAt(0);
  return key.length === 1 && code >= 64 && code <= 95 ? String.fromCharCode(code - 64) : null;
}

export class TerminalKeys {
  /** `send(data)` types into the terminal shown; `arrow(key)` is that terminal's cursor key sequence.
   * @param {HTMLElement} root
   * @param {{send: (data: string) => void, arrow: (key: Arrow) => string}} parts */
  constructor(root, { send, arrow }) {
    this.armed = false;
    this.ctrl = h("button", { type: "button", class: "terminal-key", "data-key": "Ctrl", "aria-pressed": "false",
      title: "Ctrl with the next key" }, "Ctrl");
    this.ctrl.addEventListener("click", () => this.#arm(!this.armed));
    const keys = KEYS.map(({ label, name, data, arrow: cursor }) => {
      const key = h("button", { type: "button", class: "terminal-key", "data-key": name, title: name }, label);
      key.addEventListener("click", () => {
        const typed = this.apply(data ?? ""); // and Ctrl, armed before an arrow, is spent on it
        send(cursor ? arrow(cursor) : typed);
      });
      return key;
    });
    root.replaceChildren(this.ctrl, ...keys);
    // A tap on the row keeps the focus (and the phone's keyboard) on the terminal.
    root.addEventListener("pointerdown", (event) => event.preventDefault());
  }

  /** What the terminal sends for typed `data`: a single key as its control character while Ctrl is armed.
   * @param {string} data */
  apply(data) {
    if (!this.armed) return data;
    this.#arm(false);
    return data.length === 1 ? controlOf(data) ?? data : data;
  }

  /** @param {boolean} on */
  #arm(on) {
    this.armed = on;
    this.ctrl.setAttribute("aria-pressed", String(on));
  }
}
