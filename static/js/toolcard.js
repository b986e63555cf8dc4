// @ts-check
// One card per tool call: its name and what it is about, its arguments as they stream, its live output and its
// result; the approval box (approval.js) while the call waits for the user; a sub-agent's work inside the card of
// the call that delegated to it. What sets a tool's card apart is looked up in tools.js.
import { ApprovalBox } from "./approval.js";
import { formatDuration, h, icon } from "./dom.js";
import { linkPaths } from "./preview.js";
import { argumentSummary, renderArguments } from "./toolargs.js";
import { CODE_LANGUAGES, toolKind } from "./tools.js";

/** @typedef {import("./requests.js").Ack} Ack */
/** @typedef {"running" | "approval" | "ok" | "failed" | "rejected" | "stopped" | "unchanged"} CardState */
/** A call's result: a `tool` event's `result` phase, or a result record of the history (records.js);
 * `declined` when the user declined the call (it shows as rejected, not failed), `cancelled` when the user's stop
 * cut it (stopped, not failed), `unchanged` when it found nothing to change (an edit the file already holds).
 * A live result says `unchanged` in its `details`.
 * @typedef {{ok?: boolean, output?: string, duration_ms?: number | null, declined?: boolean, cancelled?: boolean,
 *   unchanged?: boolean, details?: Record<string, unknown>}} CallResult */

const LIVE_OUTPUT_LIMIT = 100_000;
const OPEN_OUTPUT_LINES = 12;
const CLOCK_TICK_MS = 100;
const PREVIEWED_KEYS = Object.keys(CODE_LANGUAGES); // while an approval shows the code, only it does
/** @type {Record<CardState, string>} */
const STATE_LABELS = {
  running: "running", approval: "needs approval", ok: "ok", failed: "failed", rejected: "rejected", stopped: "stopped", unchanged: "no change",
};

export class ToolCard {
  /** onApprove(approved, always): the user's decision sent to the server, the ack.
   * @param {{callId: string, name: string | undefined, onApprove: (approved: boolean, always: boolean) => Promise<Ack>}} call */
  constructor({ callId, name, onApprove }) {
    this.callId = callId;
    this.name = name || "tool";
    this.onApprove = onApprove;
    /** @type {CardState} */
    this.state = "running";
    this.prepared = false; // its arguments are all in
    this.rejected = false; // the user rejected it here
    /** @type {unknown} the parsed arguments (the raw text when they are not valid JSON) */
    this.parsedArgs = undefined;
    /** @type {Text | null} the arguments as they stream */
    this.liveArgs = null;
    /** @type {HTMLElement | null} the output as it streams */
    this.liveOutput = null;
    /** @type {ApprovalBox | null} */
    this.approval = null;
    /** @type {ReturnType<typeof setInterval> | null} */
    this.clock = null;
    /** @type {HTMLDetailsElement | null} a sub-agent's work (nest) */
    this.nested = null;
    /** @type {HTMLElement | null} */
    this.extra = null;
    this.status = h("span", { class: "tool-status" });
    this.summary = h("span", { class: "tool-summary" });
    this.badge = h("span", { class: "tool-badge" });
    this.duration = h("span", { class: "tool-duration" });
    this.head = h(
      "button",
      { type: "button", class: "tool-head", "aria-expanded": "true", onclick: () => this.toggle() },
      this.status,
      icon("tool", "tool-icon"),
      h("span", { class: "tool-name", text: this.name }),
      this.summary,
      h("span", { class: "tool-spacer" }),
      this.duration,
      this.badge,
      icon("chevron", "tool-chevron"),
    );
    this.args = h("div", { class: "tool-args" });
    this.body = h("div", { class: "tool-body" }, this.args);
    this.el = h("article", { class: "tool-card", "data-call-id": callId, "data-tool": this.name }, this.head, this.body);
    this.kind = toolKind(this.name);
    if (this.kind.delegates) this.el.classList.add("delegate-card");
    if (this.kind.plan) this.el.classList.add("plan-tool");
    this.setState("running");
  }

  /** @param {CardState} state
   * @param {string} [label] the badge's text, when not the state's */
  setState(state, label) {
    this.state = state;
    this.el.dataset.state = state;
    this.status.replaceChildren(
      state === "running" ? h("span", { class: "spinner", role: "img", "aria-label": "running" })
        : state === "approval" ? icon("alert")
          : icon(state === "ok" || state === "unchanged" ? "check" : "close"),
    );
    this.badge.textContent = label ?? (state === "running" && !this.prepared ? "preparing" : STATE_LABELS[state]);
  }

  /** Open or close the card's body (by default: the other way). */
  toggle(open = this.head.getAttribute("aria-expanded") !== "true") {
    this.head.setAttribute("aria-expanded", String(open));
    this.body.hidden = !open;
  }

  /** @param {string | undefined} delta the next piece of the arguments' JSON */
  appendArgs(delta) {
    if (!this.liveArgs) {
      this.liveArgs = document.createTextNode("");
      this.args.replaceChildren(h("pre", { class: "arg-text live" }, this.liveArgs));
    }
    this.liveArgs.appendData(delta ?? "");
  }

  /** @param {unknown} args the whole arguments: parsed, or their JSON text */
  setArguments(args) {
    this.prepared = true;
    if (this.state === "running") this.badge.textContent = "running";
    let parsed = args;
    if (typeof args === "string") {
      try {
        parsed = JSON.parse(args);
      } catch {
        parsed = args;
      }
    }
    this.liveArgs = null;
    if (this.state === "running") this.#startClock();
    this.summary.textContent = argumentSummary(parsed);
    this.summary.title = this.summary.textContent;
    this.parsedArgs = parsed;
    this.#renderArgs();
  }

  /** The arguments; while an approval shows the command or code, only once: in its preview. */
  #renderArgs() {
    const omit = this.approval ? PREVIEWED_KEYS : [];
    const view = renderArguments(this.parsedArgs, omit);
    this.args.replaceChildren(...(view ? [view] : []));
  }

  /** Elapsed time while a command runs, from now until its result or an interruption. */
  #startClock() {
    if (!this.kind.runs || this.clock) return;
    const started = performance.now();
    const tick = () => { this.duration.textContent = formatDuration(performance.now() - started); };
    tick();
    this.clock = setInterval(tick, CLOCK_TICK_MS);
    this.el.classList.add("timing");
  }

  #stopClock() {
    if (this.clock !== null) clearInterval(this.clock);
    this.clock = null;
    this.el.classList.remove("timing");
  }

  /** The call waits for the user: the approval box, focused unless the user is typing elsewhere.
   * @param {string | undefined} preview what the user approves
   * @param {string[] | undefined} warnings what a reader could miss in it */
  showApproval(preview, warnings) {
    this.#stopClock();
    this.duration.textContent = "";
    this.setState("approval");
    this.toggle(true);
    const box = new ApprovalBox({ name: this.name, kind: this.kind, preview, warnings }, {
      send: (approved, always) => this.onApprove(approved, always),
      decided: (approved) => this.#decided(approved),
    });
    this.approval?.el.remove();
    this.approval = box;
    this.args.after(box.el);
    if (this.parsedArgs !== undefined) this.#renderArgs();
    box.focus();
  }

  /** The server has the user's decision: a rejected call waits for its result; an approved one runs.
   * @param {boolean} approved */
  #decided(approved) {
    this.rejected = !approved;
    if (this.state === "approval") this.setState("running");
    if (approved && this.state === "running") this.#startClock();
  }

  /** Where the sub-agent this call hands work to shows it (made at its first event): its answers,
   * thinking and tool cards, labelled with its name.
   * @param {string | undefined} agent
   * @returns {HTMLElement} */
  nest(agent) {
    if (!this.nestedBody) {
      this.nestedBody = h("div", { class: "sub-agent-body" });
      this.nestedLabel = h("span", { class: "sub-agent-count" });
      this.nested = /** @type {HTMLDetailsElement} */ (h(
        "details",
        { class: "sub-agent", open: true, "data-agent": agent ?? "" },
        h("summary", { class: "sub-agent-head" }, icon("chevron", "sub-agent-chevron"),
          h("span", { class: "sub-agent-arrow", "aria-hidden": "true", text: "↳" }),
          h("span", { class: "sub-agent-name", text: agent ?? "sub-agent" }), this.nestedLabel),
        this.nestedBody,
      ));
      this.body.insertBefore(this.nested, this.#output());
      this.toggle(true);
    }
    return this.nestedBody;
  }

  /** @param {string | undefined} delta the next piece of a command's output */
  appendOutput(delta) {
    if (!this.liveOutput) {
      this.liveOutput = h("pre", { class: "tool-output-live" });
      this.body.append(this.liveOutput);
    }
    this.liveOutput.append(delta ?? "");
    if (this.liveOutput.textContent.length > LIVE_OUTPUT_LIMIT * 1.5) {
      this.liveOutput.textContent = this.liveOutput.textContent.slice(-LIVE_OUTPUT_LIMIT);
    }
    this.liveOutput.scrollTop = this.liveOutput.scrollHeight;
  }

  /** A `tool` event's `result` (or a result record of the history).
   * @param {CallResult} result */
  setResult(result) {
    const { ok, output, duration_ms: durationMs } = result;
    this.#stopClock();
    this.liveOutput?.remove();
    this.liveOutput = null;
    const rejected = ok === false && (this.rejected || result.declined === true);
    const unchanged = result.unchanged || result.details?.unchanged === true;
    this.setState(rejected ? "rejected" : ok !== false ? "ok" : result.cancelled ? "stopped" : unchanged ? "unchanged" : "failed");
    this.duration.textContent = durationMs === undefined || durationMs === null || rejected ? "" : formatDuration(durationMs);
    const text = String(output ?? "");
    const lines = text ? text.split("\n").length : 0;
    const details = /** @type {HTMLDetailsElement} */ (h(
      "details",
      { class: "tool-output", open: ["failed", "unchanged"].includes(this.state) || (this.state === "ok" && lines <= OPEN_OUTPUT_LINES && !this.kind.delegates) },
      h("summary", {}, text ? `Output · ${lines} line${lines === 1 ? "" : "s"}` : "No output"),
      text ? h("pre", {}, linkPaths(text)) : null,
    ));
    this.#output()?.remove();
    this.body.append(details);
    if (this.nested) {
      // The sub-agent's work folds away, and so does its report: the delegating agent answers from it next.
      const calls = this.nestedBody.querySelectorAll(".tool-card").length;
      this.nestedLabel.textContent = calls ? ` · ${calls} tool call${calls === 1 ? "" : "s"}` : "";
      this.nested.open = false;
    }
    if (ok !== false && !this.kind.delegates) this.toggle(false);
  }

  /** Put a box (a proposed edit) above the output; open the card when the box needs the user.
   * @param {HTMLElement} el
   * @param {boolean} open */
  attach(el, open) {
    this.extra?.remove();
    this.extra = el;
    const output = this.#output();
    if (output) output.open = false;
    this.body.insertBefore(el, output);
    if (open) this.toggle(true);
  }

  /** The card's result: its own, not that of a call its sub-agent made (whose card is nested in this one).
   * @returns {HTMLDetailsElement | null} */
  #output() {
    return this.body.querySelector(":scope > details.tool-output");
  }

  /** The task ended while this call was still running or waiting.
   * @param {string} label what the badge says instead of "failed" */
  interrupt(label) {
    this.#stopClock();
    if (this.state === "running" || this.state === "approval") {
      this.approval?.close();
      if (this.liveArgs) {
        try {
          this.setArguments(JSON.parse(this.liveArgs.data));
        } catch {
          // Arguments cut off mid-stream stay as raw text.
        }
      }
      if (label === "cancelled") this.setState("stopped");
      else this.setState("failed", label);
    }
  }
}
