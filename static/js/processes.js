// @ts-check
// The sidebar's processes panel: the open conversation's background processes (command, state, ports, when it
// started), each with its live output (processoutput.js), Stop, Restart, and Open per port (the app, through the
// app proxy, in a new tab). It loads with list_processes and then follows the `process` events that come after
// the list's seq (conversationevents.js hands them over in seq order); the status bar counts the running ones.
import { h } from "./dom.js";
import { ProcessOutput } from "./processoutput.js";

/** @typedef {import("./requests.js").ProcessItem} ProcessItem */
/** A listed process; a person's terminal (origin "user") says so, and what runs in it now (null: its prompt).
 * @typedef {ProcessItem & {terminal?: boolean, foreground?: string | null}} ListedItem */
/** @typedef {import("./events.js").ProcessEvent} ProcessEvent */
/** @typedef {{item: ProcessItem, output: ProcessOutput, row: HTMLElement}} Shown */

const REASONS = {
  exited: "exited", stopped: "stopped", killed_limit: "killed at a limit", session_idle: "ended: session idle",
  conversation_deleted: "ended: conversation deleted", server_stopped: "ended with the server", disk_floor: "ended: disk nearly full",
  session_ended: "ended with its session", moved: "ended: moved to another server process",
};

/** A process's state in words.
 * @param {ProcessItem} item */
function stateText(item) {
  if (item.running) return "running";
  const why = REASONS[item.end_reason ?? "exited"] ?? item.end_reason ?? "ended";
  return item.exit_code === null || item.exit_code === undefined ? why : `${why} (code ${item.exit_code})`;
}

/** @param {string | null | undefined} iso */
function clock(iso) {
  const when = iso ? new Date(iso) : null;
  return when && !Number.isNaN(when.getTime()) ? when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "";
}

/** A person's terminal: what runs in it now (as listed); it is used in the terminal panel, not from here.
 * @param {ListedItem} item */
function terminalRow(item) {
  const doing = !item.running ? stateText(item) : item.foreground ? `running ${item.foreground}` : "at its prompt";
  return h("li", { class: "process-item", "data-process": item.id, "data-kind": "terminal", "data-state": item.running ? "running" : "ended" },
    h("div", { class: "process-head" },
      h("span", { class: "process-dot", "aria-hidden": "true" }),
      h("span", { class: "process-id" }, item.id),
      h("code", { class: "process-command", title: item.foreground ?? "" }, "Your terminal")),
    h("div", { class: "process-meta", "data-testid": "process-meta" },
      h("span", { "data-role": "state" }, doing),
      clock(item.started_at) ? h("span", {}, `opened ${clock(item.started_at)}`) : null),
    h("pre", { class: "process-output", hidden: true }));
}

export class ProcessesPanel {
  /** `count` is the status bar's button that counts the running processes and reveals the panel (`reveal`).
   * @param {HTMLElement} root
   * @param {{request: import("./requests.js").Request, count: HTMLElement, reveal: () => void}} parts */
  constructor(root, { request, count, reveal }) {
    this.root = root;
    this.list = /** @type {HTMLElement} */ (root.querySelector("[data-role=list]"));
    this.request = request;
    this.count = count;
    count.addEventListener("click", () => {
      reveal();
      this.root.scrollIntoView({ block: "nearest" });
    });
    /** @type {string | null} */
    this.cid = null;
    /** @type {Map<string, Shown>} */
    this.shown = new Map();
    /** @type {ProcessEvent[] | null} events held while the list loads */
    this.held = null;
    this.loads = 0;
  }

  /** The open conversation changed: list its processes, then follow its events.
   * @param {string | null} cid */
  async show(cid) {
    this.cid = cid;
    this.shown.clear();
    this.list.replaceChildren();
    this.#summarise();
    if (!cid) return;
    const load = ++this.loads;
    this.held = [];
    const ack = await this.request("list_processes", { conversation_id: cid });
    if (load !== this.loads) return;
    const held = this.held;
    this.held = null;
    for (const item of ack.ok ? ack.processes ?? [] : []) this.#put(item);
    const seq = ack.seq ?? 0;
    for (const event of held) if ((event.seq ?? 0) > seq) this.apply(event);
    this.#summarise();
  }

  /** A `process` event of the open conversation, in seq order.
   * @param {ProcessEvent} event */
  apply(event) {
    if (event.conversation_id !== this.cid) return;
    if (this.held) return void this.held.push(event);
    const shown = this.shown.get(event.process_id);
    if (event.phase === "started") {
      this.#put({ id: event.process_id, pid: event.pid, command: event.command ?? "", origin: event.origin,
        started_at: new Date().toISOString(), running: true, ports: event.ports ?? [] });
    } else if (!shown) {
      return;
    } else if (event.phase === "output") {
      shown.output.append(event.offset ?? 0, event.delta ?? "");
    } else if (event.phase === "ports") {
      this.#put({ ...shown.item, ports: event.ports ?? [] });
    } else if (event.phase === "exited") {
      this.#put({ ...shown.item, running: false, ports: [], exit_code: event.exit_code ?? null, end_reason: event.reason ?? "exited" });
    }
    this.#summarise();
  }

  /** Add or redraw a process's row.
   * @param {ProcessItem} item */
  #put(item) {
    const old = this.shown.get(item.id);
    const row = this.#row(item);
    const output = old?.output ?? new ProcessOutput(/** @type {HTMLElement} */ (row.querySelector("pre")), (offset) =>
      this.request("process_output", { conversation_id: this.cid, process_id: item.id, offset }));
    output.knownEnd(item.output_end);
    if (old) {
      const view = output.view;
      row.querySelector("pre")?.replaceWith(view);
      old.row.replaceWith(row);
      row.classList.toggle("output-open", !view.hidden);
    } else {
      this.list.prepend(row);
    }
    this.shown.set(item.id, { item, output, row });
  }

  /** @param {ListedItem} item */
  #row(item) {
    if (item.terminal) return terminalRow(item);
    const action = (label, testid, onclick, title) =>
      h("button", { type: "button", class: "btn btn-sm", "data-testid": testid, title, onclick }, label);
    const opens = item.running ? item.ports.map((port) =>
      action(`Open :${port}`, "process-open", () => this.#open(item.id, port), `Open what listens on port ${port} in a new tab`)) : [];
    return h("li", { class: "process-item", "data-process": item.id, "data-state": item.running ? "running" : "ended" },
      h("div", { class: "process-head" },
        h("span", { class: "process-dot", "aria-hidden": "true" }),
        h("span", { class: "process-id" }, item.id),
        h("code", { class: "process-command", title: item.command }, item.command)),
      h("div", { class: "process-meta", "data-testid": "process-meta" },
        h("span", { "data-role": "state" }, stateText(item)),
        item.ports.length ? h("span", { "data-role": "ports" }, item.ports.map((p) => `:${p}`).join(" ")) : null,
        clock(item.started_at) ? h("span", {}, `started ${clock(item.started_at)}`) : null),
      h("div", { class: "process-actions" },
        ...opens,
        action("Output", "process-output-toggle", () => this.#toggleOutput(item.id), "Show or hide its output"),
        item.running ? action("Stop", "process-stop", () => this.#act("stop_process", item.id), "Stop it (SIGTERM, then SIGKILL)") : null,
        action("Restart", "process-restart", () => this.#act("restart_process", item.id), "Stop it if it runs, and run the same command again"),
        h("span", { class: "process-error", "data-role": "error", role: "alert" })),
      h("pre", { class: "process-output", "data-testid": "process-output", hidden: true }));
  }

  /** @param {string} id */
  #toggleOutput(id) {
    const shown = this.shown.get(id);
    if (!shown) return;
    const view = shown.output.view;
    view.hidden = !view.hidden;
    shown.row.classList.toggle("output-open", !view.hidden);
    if (!view.hidden) shown.output.show();
  }

  /** Stop or restart; a failure is said on its row.
   * @param {"stop_process" | "restart_process"} op
   * @param {string} id */
  async #act(op, id) {
    const ack = await this.request(op, { conversation_id: this.cid, process_id: id });
    if (ack.ok && ack.process && !this.shown.has(ack.process.id)) this.#put(ack.process);
    if (!ack.ok) this.#fail(id, ack.error?.message ?? "failed");
    this.#summarise();
  }

  /** Open the app on `port` in a new tab. The tab opens at once (the click allows it) and loses its way back
   * to this page before it goes to the app's address: the app is another origin, not to steer this tab.
   * @param {string} id
   * @param {number} port */
  async #open(id, port) {
    const tab = window.open("about:blank", "_blank");
    if (tab) tab.opener = null;
    const ack = await this.request("open_app", { conversation_id: this.cid, process_id: id, port });
    if (ack.ok && ack.url) {
      if (tab) tab.location.href = ack.url;
      else window.location.assign(ack.url); // no new tab allowed: open it here
      return;
    }
    tab?.close();
    this.#fail(id, ack.error?.message ?? "the app could not be opened");
  }

  /** @param {string} id
   * @param {string} message */
  #fail(id, message) {
    const el = this.shown.get(id)?.row.querySelector("[data-role=error]");
    if (el) el.textContent = message;
  }

  /** The panel shows when the conversation has processes; the status bar counts the running ones. */
  #summarise() {
    const running = [...this.shown.values()].filter((s) => s.item.running).length;
    this.root.hidden = this.shown.size === 0;
    this.count.hidden = running === 0;
    this.count.textContent = running === 1 ? "1 process running" : `${running} processes running`;
    this.count.dataset.count = String(running);
  }
}
