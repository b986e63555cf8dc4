// @ts-check
// The status bar: connection, task state, context meter, focus files, agent/provider/model/mode/approval/sandbox.
// Mode, approval and agent are what the open conversation's next task runs with (the composer's choices).
import { formatCount, h, icon } from "./dom.js";
import { hasCalls, spendText } from "./money.js";

const CONNECTION_TEXT = {
  connecting: "Connecting…",
  connected: "Connected",
  reconnecting: "Reconnecting…",
  disconnected: "Disconnected",
  refused: "Not authorised",
};
// "thinking" is the server's state while a model call has not streamed an answer yet; "reasoning" is
// ours, once the model's reasoning arrives (thinking mode only).
const TASK_TEXT = { idle: "Idle", thinking: "Waiting for the model", reasoning: "Thinking", streaming: "Writing", tool: "Running tool" };
const APPROVAL_TEXT = { auto: "auto", ask: "ask", "read-only": "read-only" };
const METER_MEANING = "Tokens the model sees on its next call, of its context window: instructions, tools and the "
  + "conversation so far (the provider's count where known, else an estimate). It only grows during a task; it goes down "
  + "when a task starts on another branch or older turns are condensed.";
const NOT_ISOLATED = /^not isolated/i;
const REFUSED = /^commands: /i; // as root without bubblewrap, no command runs
const WEAK = /^(not isolated|commands: |memory: not bounded|set-id bits: not refused)/i;

export class StatusBar {
  constructor(root) {
    this.root = root;
    this.part = (role) => root.querySelector(`[data-role="${role}"]`);
    this.meter = root.querySelector("#context-meter");
    this.compactButton = h("button", {
      type: "button", class: "compact-button", "data-testid": "compact", disabled: true,
      title: "Summarise the older turns so the context holds less (the first message and the newest turn stay as they are)",
      onclick: () => this.onCompact?.(),
    }, "Compact");
    this.meter.after(this.compactButton);
    /** @type {(() => void) | undefined} */
    this.onCompact; // the Compact button's action, set by the app (declared here for the type checker)
    this.sandboxDetails = document.getElementById("sandbox-details");
    this.#bindSandbox();
    this.#bindMore();
    this.setConnection("connecting");
    this.resetTask();
  }

  /** The isolation list shows while the pointer is over the sandbox item, or until a second click. */
  #bindSandbox() {
    const item = this.part("sandbox-item");
    const button = this.part("sandbox");
    const details = this.sandboxDetails;
    let pinned = false;
    const show = (open) => {
      details.hidden = !open;
      button.setAttribute("aria-expanded", String(open));
    };
    button.addEventListener("click", () => show((pinned = !pinned)));
    item.addEventListener("mouseenter", () => show(true));
    item.addEventListener("mouseleave", () => show(pinned));
    document.addEventListener("click", (event) => {
      const target = /** @type {Node} */ (event.target);
      if (pinned && !item.contains(target) && !details.contains(target)) show((pinned = false));
    });
  }

  /** On a narrow screen the bar is one line (connection, task, context); a tap on "More" shows the rest. */
  #bindMore() {
    const more = h("button", {
      type: "button", class: "status-more", "data-testid": "status-more", "aria-expanded": "false",
      "aria-label": "Show the agent, model, mode, approval and sandbox", title: "Show the agent, model, mode, approval and sandbox",
    }, h("span", { class: "status-more-text" }, "More"));
    more.addEventListener("click", () => {
      const open = !this.root.classList.contains("expanded");
      this.root.classList.toggle("expanded", open);
      more.setAttribute("aria-expanded", String(open));
      more.querySelector(".status-more-text").textContent = open ? "Less" : "More";
    });
    this.root.append(more);
  }

  setConnection(state) {
    const el = this.part("connection");
    el.dataset.state = state;
    el.querySelector(".label").textContent = CONNECTION_TEXT[state] ?? state;
  }

  /** subAgent: the sub-agent whose state it is (null: the conversation's agent); iteration: the last known when absent.
   * @param {import("./events.js").TaskState | "reasoning"} [state]
   * @param {number} [iteration]
   * @param {string | null} [subAgent] */
  setTask(state, iteration, subAgent = null) {
    const el = this.part("task");
    el.dataset.state = state ?? "idle";
    if (Number.isInteger(iteration)) this.iteration = iteration;
    if (!state || state === "idle") this.iteration = 0;
    this.subAgent = subAgent;
    let text = TASK_TEXT[state] ?? state ?? "Idle";
    if (state && state !== "idle" && this.iteration > 0) text += ` · step ${this.iteration}`;
    if (subAgent && state !== "idle") text = `${subAgent}: ${text}`;
    el.querySelector(".label").textContent = text;
  }

  /** The model's reasoning is streaming (only a thinking call sends it). */
  setReasoning(subAgent = null) {
    if (this.part("task").dataset.state !== "reasoning" || subAgent !== this.subAgent) this.setTask("reasoning", undefined, subAgent);
  }

  /** What the next task of the open conversation runs with: {mode, approval, agent} (the composer's choices). */
  setChoices({ mode, approval, agent }) {
    if (mode) this.part("mode").textContent = mode;
    if (approval) this.part("approval").textContent = APPROVAL_TEXT[approval] ?? approval;
    if (agent !== undefined) this.setAgent(agent);
  }

  /** The focused files (pinned for every model call); onUnfocus(path) removes one. */
  setFocus(paths, onUnfocus) {
    const item = this.part("focus-item");
    item.hidden = !paths.length;
    this.part("focus").replaceChildren(...paths.map((path) => h("span", { class: "focus-chip", title: path },
      h("span", { class: "focus-name", text: path.split("/").pop() }),
      h("button", { type: "button", class: "focus-remove", "aria-label": `Unfocus ${path}`, title: "Unfocus", onclick: () => onUnfocus(path) }, "×"))));
  }

  /** The open conversation's agent (null: the server's default, for a new conversation). */
  setAgent(name) {
    this.agent = name || null;
    const shown = this.agent ?? this.defaultAgent ?? "—";
    const el = this.part("agent");
    el.textContent = shown;
    el.title = this.descriptions?.get(shown) ?? "";
  }

  resetTask() {
    this.setTask("idle");
    this.setContext(null);
    this.setSpend({});
  }

  /** Tokens and cost: the running task's as it goes (`status.usage`), else the conversation's ended tasks';
   * the tooltip adds today's across conversations (get_conversation's `spend`).
   * @param {{task?: Partial<import("./events.js").Usage> | null, conversation?: Partial<import("./events.js").Usage> | null,
   *   today?: Partial<import("./events.js").Usage> | null}} figures: the ones given replace the ones shown */
  setSpend(figures) {
    this.spend = figures.task === undefined && figures.conversation === undefined && figures.today === undefined
      ? {} : { ...this.spend, ...figures };
    const { task, conversation, today } = this.spend;
    const shown = task ?? (hasCalls(conversation) ? conversation : null);
    const item = this.part("spend-item");
    item.hidden = !shown;
    if (!shown) return;
    this.part("spend-key").textContent = task ? "Task" : "Conversation";
    this.part("spend").textContent = spendText(shown);
    item.title = [
      task ? `This task so far: ${spendText(task)}` : null,
      conversation ? `This conversation's ended tasks: ${spendText(conversation)}` : null,
      today ? `Today, every conversation: ${spendText(today)}` : null,
    ].filter(Boolean).join("\n");
  }

  /** The workspace's git branch, or null (no repository): hidden then.
   * @param {string | null} branch */
  setBranch(branch) {
    this.part("branch-item").hidden = branch === null;
    this.part("branch").textContent = branch ?? "";
  }

  /** Whether the Compact button applies: a conversation is open (onCompact is set by the app). */
  setCompactable(enabled) {
    this.compactable = enabled;
    this.compactButton.disabled = !enabled || this.meter.dataset.condensing === "true";
  }

  /** The history is being condensed (a `context` event with phase `condensing`) or no longer. */
  setCondensing(condensing) {
    this.meter.dataset.condensing = String(condensing);
    this.compactButton.textContent = condensing ? "Condensing…" : "Compact";
    this.setCompactable(Boolean(this.compactable));
  }

  /** @param {import("./events.js").ContextUsage | null} context */
  setContext(context) {
    const used = Number(context?.used_tokens);
    const limit = Number(context?.limit_tokens);
    const fill = this.meter.querySelector(".meter-fill");
    const text = this.meter.querySelector(".meter-text");
    if (!Number.isFinite(used) || !Number.isFinite(limit) || limit <= 0) {
      fill.style.width = "0%";
      text.textContent = "—";
      this.meter.dataset.level = "none";
      this.meter.setAttribute("aria-valuenow", "0");
      this.meter.title = `${METER_MEANING} No model call yet.`;
      return;
    }
    const ratio = Math.min(1, used / limit);
    fill.style.width = `${(ratio * 100).toFixed(1)}%`;
    text.textContent = `${formatCount(used)} / ${formatCount(limit)}`;
    this.meter.dataset.level = ratio >= 0.85 ? "high" : ratio >= 0.6 ? "mid" : "low";
    this.meter.setAttribute("aria-valuenow", String(Math.round(ratio * 100)));
    this.meter.title = `Context: ${used.toLocaleString()} of ${limit.toLocaleString()} tokens (${Math.round(ratio * 100)}%). ${METER_MEANING}`;
  }

  /** Fill the right-hand side from a get_status answer. */
  setInfo(status) {
    this.defaultAgent = status.agent ?? null;
    this.descriptions = new Map((status.agents ?? []).map((agent) => [agent.name, agent.description ?? ""]));
    this.setAgent(this.agent);
    const model = [status.provider, status.model].filter(Boolean).join(" · ");
    this.part("model").textContent = model || "—";
    this.part("model").title = status.api?.base_url ? `Endpoint: ${status.api.base_url}` : "";
    this.setSandbox(status.sandbox ?? {});
    this.part("api").hidden = status.api?.configured !== false;
    if (status.context) this.setContext(status.context);
  }

  /** Kind of sandbox and its network (off, outbound, host), in a warning style when commands are refused or some
   * part of the machine is not isolated from them. */
  setSandbox({ kind, isolation, network }) {
    const lines = Array.isArray(isolation) ? isolation.map(String) : [];
    const refused = lines.some((line) => REFUSED.test(line));
    const exposed = lines.some((line) => NOT_ISOLATED.test(line));
    const note = refused ? " · commands refused" : exposed ? " · not isolated" : "";
    const net = typeof network === "string" && !refused ? ` · network ${network}` : "";
    const button = this.part("sandbox");
    button.replaceChildren(note ? icon("alert") : icon("shield"), kind ?? "—", net, note);
    button.dataset.level = note || network === "host" ? "warn" : "ok";
    button.dataset.network = typeof network === "string" ? network : "";
    this.sandboxDetails.querySelector("[data-role=isolation]").replaceChildren(
      ...(lines.length ? lines : ["No details reported."]).map((line) => h("li", { class: WEAK.test(line) ? "warn" : null }, line)),
    );
  }
}
