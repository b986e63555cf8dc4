// The status bar: connection, task state, context meter, provider/model/mode/approval/sandbox.
import { formatCount } from "./dom.js";

const CONNECTION_TEXT = {
  connecting: "Connecting…",
  connected: "Connected",
  reconnecting: "Reconnecting…",
  disconnected: "Disconnected",
  refused: "Not authorised",
};
const TASK_TEXT = { idle: "Idle", thinking: "Thinking", streaming: "Writing", tool: "Running tool" };

export class StatusBar {
  constructor(root) {
    this.root = root;
    this.part = (role) => root.querySelector(`[data-role="${role}"]`);
    this.meter = root.querySelector("#context-meter");
    this.setConnection("connecting");
    this.resetTask();
  }

  setConnection(state) {
    const el = this.part("connection");
    el.dataset.state = state;
    el.querySelector(".label").textContent = CONNECTION_TEXT[state] ?? state;
  }

  setTask(state, iteration) {
    const el = this.part("task");
    el.dataset.state = state ?? "idle";
    let text = TASK_TEXT[state] ?? state ?? "Idle";
    if (state && state !== "idle" && Number.isInteger(iteration) && iteration > 0) text += ` · step ${iteration}`;
    el.querySelector(".label").textContent = text;
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
    const model = [status.provider, status.model].filter(Boolean).join(" · ");
    this.part("model").textContent = model || "—";
    this.part("model").title = status.api?.base_url ? `Endpoint: ${status.api.base_url}` : "";
    this.part("mode").textContent = status.mode ?? "—";
    this.part("approval").textContent = status.approval ?? "—";
    const sandbox = status.sandbox ?? {};
    this.part("sandbox").textContent = sandbox.kind ?? "—";
    this.part("sandbox").title = sandbox.isolation?.length ? `Isolation: ${sandbox.isolation.join(", ")}` : "";
    this.part("api").hidden = status.api?.configured !== false;
    if (status.context) this.setContext(status.context);
  }
}
