// @ts-check
// The person's terminals in the open conversation (docs/protocol.md §4.1 terminal_*): a panel with a tab per
// terminal, + to open one and × to close one, the phone's key row, and "Send to agent", which puts the shown
// terminal's recent output in the composer (nothing is sent: nothing typed here reaches the model otherwise).
// A terminal is a shell in the conversation's sandbox session and outlives the page: a reload or a reconnect
// attaches to it again and shows its scrollback.
import { h } from "./dom.js";
import { TerminalKeys } from "./terminalkeys.js";
import { TerminalView } from "./terminalview.js";

/** @typedef {import("./events.js").TerminalEvent} TerminalEvent */

const SENT_LINES = 60; // what Send to agent takes from the screen and its scrollback
const OPEN_KEY = "terminal-open"; // sessionStorage: the panel stays open across a reload
const NO_CONVERSATION = "A terminal runs in a conversation's sandbox: send a first message, then open one.";

/** `text` in a Markdown code fence longer than any run of backticks in it.
 * @param {string} text */
function fenced(text) {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  return `${fence}\n${text}\n${fence}\n`;
}

export class TerminalPanel {
  /** `toggle` shows and hides the panel; `onSendToAgent(text)` puts text in the composer.
   * @param {HTMLElement} root
   * @param {{request: import("./requests.js").Request, toggle: HTMLElement, onSendToAgent: (text: string) => void}} parts */
  constructor(root, { request, toggle, onSendToAgent }) {
    this.root = root;
    this.request = request;
    this.toggle = toggle;
    const part = (/** @type {string} */ role) => /** @type {HTMLElement} */ (root.querySelector(`[data-role=${role}]`));
    this.tabs = part("tabs");
    this.screens = part("screens");
    this.error = part("error");
    this.sendButton = /** @type {HTMLButtonElement} */ (part("send"));
    /** @type {string | null} */
    this.cid = null;
    /** @type {Map<string, {view: TerminalView, tab: HTMLElement}>} */
    this.shown = new Map();
    /** @type {string | null} the terminal on screen */
    this.current = null;
    this.loads = 0; // a newer load (another conversation, a reconnect) makes an older one's answers moot
    this.keys = new TerminalKeys(part("keys"), {
      send: (data) => this.#view()?.send(data),
      arrow: (key) => this.#view()?.arrow(key) ?? "",
    });
    toggle.addEventListener("click", () => this.setOpen(root.hidden));
    part("new").addEventListener("click", () => this.#open());
    part("hide").addEventListener("click", () => this.setOpen(false));
    this.sendButton.addEventListener("click", () => {
      const text = this.#view()?.recentText(SENT_LINES);
      if (text) onSendToAgent(fenced(text));
    });
    if (sessionStorage.getItem(OPEN_KEY)) this.#reveal(true);
  }

  /** Show or hide the panel; shown, it holds the conversation's terminals (a first one opens when it has none).
   * @param {boolean} open */
  setOpen(open) {
    this.#reveal(open);
    if (open) sessionStorage.setItem(OPEN_KEY, "1");
    else sessionStorage.removeItem(OPEN_KEY);
    if (!open) return;
    if (!this.shown.size) this.#load(true);
    this.#view()?.refit();
    this.#view()?.focus();
  }

  /** The open conversation changed (or the connection came back): its terminals, attached anew.
   * @param {string | null} cid */
  show(cid) {
    this.cid = cid;
    for (const { view, tab } of this.shown.values()) {
      view.dispose();
      tab.remove();
    }
    this.shown.clear();
    this.current = null;
    this.loads += 1;
    this.#say("");
    this.#update();
    if (!this.root.hidden) this.#load(false);
  }

  /** A `terminal` event (sent to this page only for the terminals it attached).
   * @param {TerminalEvent} event */
  apply(event) {
    if (event.conversation_id !== this.cid) return;
    const shown = this.shown.get(event.terminal_id);
    if (!shown) return; // one being opened: its attach brings it whole
    shown.view.apply(event);
    if (event.ended) shown.tab.dataset.state = "ended";
  }

  /** @param {boolean} open */
  #reveal(open) {
    this.root.hidden = !open;
    this.toggle.setAttribute("aria-pressed", String(open));
  }

  /** List the conversation's terminals and attach to each; with none, open one when `openOne` (the person asked
   * for the panel) or say how (another conversation was opened under it).
   * @param {boolean} openOne */
  async #load(openOne) {
    const load = ++this.loads;
    const cid = this.cid;
    if (!cid) return this.#say(NO_CONVERSATION);
    const ack = await this.request("list_terminals", { conversation_id: cid });
    if (load !== this.loads) return;
    if (!ack.ok) return this.#say(ack.error?.message ?? "The terminals could not be listed.");
    const listed = ack.terminals ?? [];
    for (const { terminal_id: id } of listed) this.#attach(this.#add(id), load);
    if (listed.length) this.#select(listed[listed.length - 1].terminal_id);
    else if (openOne) await this.#open();
    else this.#say("No terminal in this conversation yet: + opens one.");
  }

  /** Open a new terminal the size of the panel, and show it. */
  async #open() {
    const cid = this.cid;
    if (!cid) return this.#say(NO_CONVERSATION);
    const load = this.loads;
    const view = this.#box();
    this.#say("");
    const ack = await this.request("terminal_open", { conversation_id: cid, ...view.size });
    if (load !== this.loads || !ack.ok || !ack.terminal_id) {
      view.dispose();
      this.#view()?.box.removeAttribute("hidden");
      if (load === this.loads) this.#say(ack.error?.message ?? "The terminal could not be opened.");
      return;
    }
    this.#add(ack.terminal_id, view);
    this.#select(ack.terminal_id);
    await this.#attach(view, load);
  }

  /** A screen in a new box, the only one showing. */
  #box() {
    for (const { view } of this.shown.values()) view.box.hidden = true;
    const box = h("div", { class: "terminal-screen", "data-testid": "terminal-screen" });
    this.screens.append(box);
    const view = new TerminalView(box, {
      typed: (data) => this.keys.apply(data),
      send: (data) => this.#input(view, data),
      resize: (rows, cols) => this.#call("terminal_resize", view, { rows, cols }),
    });
    return view;
  }

  /** Its tab and its screen (a new one unless given) for terminal `id`.
   * @param {string} id
   * @param {TerminalView} [given] */
  #add(id, given) {
    const view = given ?? this.#box();
    view.connect(id);
    const tab = h("div", { class: "terminal-tab", role: "tab", "data-terminal": id, "aria-selected": "false" },
      h("button", { type: "button", class: "terminal-tab-name", onclick: () => this.#select(id) }, id),
      h("button", { type: "button", class: "terminal-tab-close", "data-testid": "terminal-close", title: `Close ${id}`,
        "aria-label": `Close terminal ${id}`, onclick: () => this.#close(id) }, "×"));
    this.tabs.append(tab);
    this.shown.set(id, { view, tab });
    this.#update();
    return view;
  }

  /** The terminal's scrollback on its screen; its live output follows.
   * @param {TerminalView} view
   * @param {number} load */
  async #attach(view, load) {
    const ack = await this.request("terminal_attach", { conversation_id: this.cid, terminal_id: view.id });
    if (load !== this.loads || !view.id) return;
    if (ack.ok) view.restore(ack.data ?? "", ack.offset ?? 0, ack.next_offset ?? 0);
    else this.#say(ack.error?.message ?? "The terminal could not be attached.");
  }

  /** @param {string} id */
  #select(id) {
    this.current = id;
    for (const [other, { view, tab }] of this.shown) {
      view.box.hidden = other !== id;
      tab.setAttribute("aria-selected", String(other === id));
    }
    this.#view()?.refit();
    this.#view()?.focus();
  }

  /** @param {string} id */
  async #close(id) {
    const shown = this.shown.get(id);
    if (!shown) return;
    if (!shown.view.ended) await this.#call("terminal_close", shown.view, {});
    shown.view.dispose();
    shown.tab.remove();
    this.shown.delete(id);
    this.#update();
    if (this.current === id) {
      const left = [...this.shown.keys()];
      this.current = null;
      if (left.length) this.#select(left[left.length - 1]);
    }
  }

  /** @param {TerminalView} view
   * @param {string} data */
  async #input(view, data) {
    const ack = await this.#call("terminal_input", view, { data });
    if (!ack.ok) this.#say(ack.error?.message ?? "The keys did not reach the terminal.");
  }

  /** A terminal op on `view`'s terminal in this conversation.
   * @param {string} op
   * @param {TerminalView} view
   * @param {object} fields */
  #call(op, view, fields) {
    return this.request(op, { conversation_id: this.cid, terminal_id: view.id, ...fields });
  }

  #view() {
    return this.current ? this.shown.get(this.current)?.view ?? null : null;
  }

  #update() {
    this.sendButton.disabled = this.shown.size === 0;
  }

  /** @param {string} message */
  #say(message) {
    this.error.textContent = message;
  }
}
