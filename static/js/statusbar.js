// The status bar: connection, task state, context meter, agent/provider/model/mode/approval/sandbox.
import { formatCount, h, icon } from "./dom.js";

const CONNECTION_TEXT = {
  connecting: "Connecting…",
  connected: "Connected",
  reconnecting: "Reconnecting…",
  disconnected: "Disconnected",
  refused: "Not authorised",
};
const TASK_TEXT = { idle: "Idle", thinking: "Thinking", streaming: "Writing", tool: "Running tool" };
const NOT_ISOLATED = /^not isolated/i;

export class StatusBar {
  constructor(root) {
    this.root = root;
    this.part = (role) => root.querySelector(`[data-role="${role}"]`);
    this.meter = root.querySelector("#context-meter");
    this.sandboxDetails = document.getElementById("sandbox-details");
    this.#bindSandbox();
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
      if (pinned && !item.contains(event.target) && !details.contains(event.target)) show((pinned = false));
    });
  }

  setConnection(state) {
    const el = this.part("connection");
    el.dataset.state = state;
    el.querySelector(".label").textContent = CONNECTION_TEXT[state] ?? state;
  }

  /** subAgent: the sub-agent whose state it is (null: the conversation's agent). */
  setTask(state, iteration, subAgent = null) {
    const el = this.part("task");
    el.dataset.state = state ?? "idle";
    let text = TASK_TEXT[state] ?? state ?? "Idle";
    if (state && state !== "idle" && Number.isInteger(iteration) && iteration > 0) text += ` · step ${iteration}`;
    if (subAgent && state !== "idle") text = `${subAgent}: ${text}`;
    el.querySelector(".label").textContent = text;
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
  }

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
      this.meter.title = "Context window: no data yet";
      return;
    }
    const ratio = Math.min(1, used / limit);
    fill.style.width = `${(ratio * 100).toFixed(1)}%`;
    text.textContent = `${formatCount(used)} / ${formatCount(limit)}`;
    this.meter.dataset.level = ratio >= 0.85 ? "high" : ratio >= 0.6 ? "mid" : "low";
    this.meter.setAttribute("aria-valuenow", String(Math.round(ratio * 100)));
    this.meter.title = `Context window: ${used.toLocaleString()} of ${limit.toLocaleString()} tokens (${Math.round(ratio * 100)}%)`;
  }

  /** Fill the right-hand side from a get_status answer. */
  setInfo(status) {
    this.defaultAgent = status.agent ?? null;
    this.descriptions = new Map((status.agents ?? []).map((agent) => [agent.name, agent.description ?? ""]));
    this.setAgent(this.agent);
    const model = [status.provider, status.model].filter(Boolean).join(" · ");
    this.part("model").textContent = model || "—";
    this.part("model").title = status.api?.base_url ? `Endpoint: ${status.api.base_url}` : "";
    this.part("mode").textContent = status.mode ?? "—";
    this.part("approval").textContent = status.approval ?? "—";
    this.setSandbox(status.sandbox ?? {});
    this.part("api").hidden = status.api?.configured !== false;
    if (status.context) this.setContext(status.context);
  }

  /** Kind of sandbox, in a warning style when some part of the machine is not isolated from commands. */
  setSandbox({ kind, isolation }) {
    const lines = Array.isArray(isolation) ? isolation.map(String) : [];
    const exposed = lines.some((line) => NOT_ISOLATED.test(line));
    const button = this.part("sandbox");
    button.replaceChildren(exposed ? icon("alert") : icon("shield"), kind ?? "—", exposed ? " · not isolated" : "");
    button.dataset.level = exposed ? "warn" : "ok";
    this.sandboxDetails.querySelector("[data-role=isolation]").replaceChildren(
      ...(lines.length ? lines : ["No details reported."]).map((line) => h("li", { class: NOT_ISOLATED.test(line) ? "warn" : null }, line)),
    );
  }
}
