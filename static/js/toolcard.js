// @ts-check
// One card per tool call: live arguments, approval, live output, result.
import { isDiff, renderDiff } from "./diffview.js";
import { formatDuration, h, icon } from "./dom.js";
import { highlight, languageForPath } from "./codehighlight.js";
import { linkPaths, openPath } from "./preview.js";

const LIVE_OUTPUT_LIMIT = 100_000;
const SUMMARY_KEYS = ["path", "command", "query", "old_path", "directory", "pattern", "scope", "code", "task"];
const BLOCK_LANGUAGES = { command: "bash", code: "python" };
const CODE_KEYS = new Set(["content", "new_content", "old_text", "new_text"]);
const PATH_KEYS = new Set(["path", "old_path", "new_path"]);
const OPEN_OUTPUT_LINES = 12;
const TIMED_TOOLS = new Set(["run_command", "run_python"]);
const CLOCK_TICK_MS = 100;
const PREVIEW_LINES = 30;
const PREVIEW_SLACK = 5;
const DELEGATE_PREFIX = "delegate_to_";
const PLAN_TOOLS = new Set(["make_plan", "finish_step"]);
const PREVIEW_LANGUAGES = { run_command: "bash", run_python: "python" };
const PREVIEWED_KEYS = ["command", "code"]; // an approval's preview shows them (control characters marked)
const DECLINED = /^The user declined this /; // the result a rejected call gets (core/tool_step.py)
const KEY_GUARD_MS = 400; // keys typed for something else just before the card took the focus do not answer it
const TYPING_PAUSE_MS = 2000;

let lastTyped = -Infinity; // when a character was last typed into a text field (a sent message clears it)
document.addEventListener("keydown", (event) => {
  if (!(event.target instanceof HTMLTextAreaElement || event.target instanceof HTMLInputElement)) return;
  if (event.key === "Enter" && !event.shiftKey) lastTyped = -Infinity;
  else if (event.key.length === 1) lastTyped = performance.now();
}, { capture: true });

/** Whether the user is busy typing elsewhere (the card then waits to be clicked or tabbed to). */
function typingElsewhere() {
  const active = document.activeElement;
  const field = active instanceof HTMLTextAreaElement || (active instanceof HTMLInputElement && active.type !== "checkbox");
  return field && (Boolean(active.value.trim()) || performance.now() - lastTyped < TYPING_PAUSE_MS);
}

function codeBlock(text, language) {
  const code = h("code", { class: "hljs" });
  code.innerHTML = highlight(String(text), language);
  return h("pre", { class: "code-block compact" }, code);
}

/** The whole preview when it is short; else its first lines and a button naming how many more
 * there are. Nothing sits out of sight in a scroll box. */
function previewBlock(text, render) {
  const lines = text.split("\n");
  if (lines.length <= PREVIEW_LINES + PREVIEW_SLACK) return h("div", { class: "approval-preview" }, render(text));
  const more = h("button", { type: "button", class: "btn btn-sm approval-more", "data-testid": "approval-more" },
    `Show ${lines.length - PREVIEW_LINES} more lines`);
  const block = h("div", { class: "approval-preview" }, render(lines.slice(0, PREVIEW_LINES).join("\n")), more);
  more.addEventListener("click", () => block.replaceChildren(render(text)));
  return block;
}

function summaryOf(args) {
  if (!args || typeof args !== "object") return "";
  if (args.old_path && args.new_path) return `${args.old_path} → ${args.new_path}`;
  for (const key of SUMMARY_KEYS) {
    if (typeof args[key] === "string" && args[key]) return args[key].split("\n")[0].slice(0, 120);
  }
  return "";
}

function renderValue(key, value, args) {
  if (typeof value !== "string") return h("code", { class: "arg-inline" }, JSON.stringify(value));
  if (isDiff(value)) return renderDiff(value);
  if (BLOCK_LANGUAGES[key]) return codeBlock(value, BLOCK_LANGUAGES[key]);
  if (PATH_KEYS.has(key) && !value.includes("\n")) {
    return h("a", { href: "#", class: "arg-inline path-link", "data-path": value, title: `Open ${value}`, onclick: (event) => {
      event.preventDefault();
      openPath(value);
    } }, value);
  }
  if (CODE_KEYS.has(key)) return codeBlock(value, languageForPath(args.path ?? ""));
  if (value.includes("\n") || value.length > 100) return h("pre", { class: "arg-text" }, value);
  return h("code", { class: "arg-inline" }, value);
}

/** Pretty view of a tool call's parsed arguments, but for the keys in `omit` (shown elsewhere). */
export function renderArguments(args, omit = []) {
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return h("pre", { class: "arg-text" }, typeof args === "string" ? args : JSON.stringify(args, null, 2));
  }
  const entries = Object.entries(args).filter(([key]) => !omit.includes(key));
  if (!entries.length) return null;
  const list = h("dl", { class: "tool-args-list" });
  for (const [key, value] of entries) {
    list.append(h("dt", { text: key }), h("dd", {}, renderValue(key, value, args)));
  }
  return list;
}

export class ToolCard {
  /** onApprove(approved, always) -> Promise of the ack. */
  constructor({ callId, name, onApprove }) {
    this.callId = callId;
    this.name = name || "tool";
    this.onApprove = onApprove;
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
    this.delegates = this.name.startsWith(DELEGATE_PREFIX);
    if (this.delegates) this.el.classList.add("delegate-card");
    if (PLAN_TOOLS.has(this.name)) this.el.classList.add("plan-tool");
    this.setState("running");
  }

  setState(state, label) {
    this.state = state;
    this.el.dataset.state = state;
    this.status.replaceChildren(
      state === "running" ? h("span", { class: "spinner", role: "img", "aria-label": "running" })
        : state === "approval" ? icon("alert")
          : icon(state === "ok" ? "check" : "close"),
    );
    const labels = {
      running: this.prepared ? "running" : "preparing", approval: "needs approval", ok: "ok", failed: "failed", rejected: "rejected",
    };
    this.badge.textContent = label ?? labels[state];
  }

  toggle(open = this.head.getAttribute("aria-expanded") !== "true") {
    this.head.setAttribute("aria-expanded", String(open));
    this.body.hidden = !open;
  }

  appendArgs(delta) {
    if (!this.liveArgs) {
      this.liveArgs = document.createTextNode("");
      this.args.replaceChildren(h("pre", { class: "arg-text live" }, this.liveArgs));
    }
    this.liveArgs.appendData(delta ?? "");
  }

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
    this.summary.textContent = summaryOf(parsed);
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
    if (!TIMED_TOOLS.has(this.name) || this.clock) return;
    const started = performance.now();
    const tick = () => { this.duration.textContent = formatDuration(performance.now() - started); };
    tick();
    this.clock = setInterval(tick, CLOCK_TICK_MS);
    this.el.classList.add("timing");
  }

  #stopClock() {
    clearInterval(this.clock);
    this.clock = null;
    this.el.classList.remove("timing");
  }

  showApproval(preview, warnings) {
    this.#stopClock();
    this.duration.textContent = "";
    this.setState("approval");
    this.toggle(true);
    const always = h("input", { type: "checkbox", class: "approval-always", "data-testid": "approve-always" });
    const error = h("p", { class: "approval-error", role: "alert", hidden: true });
    const approve = h("button", { type: "button", class: "btn btn-primary btn-sm approve-button", "data-testid": "approve" }, icon("check"), "Approve");
    const reject = h("button", { type: "button", class: "btn btn-danger-outline btn-sm reject-button", "data-testid": "reject" }, icon("close"), "Reject");
    const keys = h("span", { class: "approval-keys", "aria-hidden": "true" },
      h("kbd", { text: "Enter" }), " or ", h("kbd", { text: "Y" }), " approve · ", h("kbd", { text: "Esc" }), " or ", h("kbd", { text: "N" }), " reject");
    const actions = h(
      "div",
      { class: "approval-actions" },
      approve,
      reject,
      h("label", { class: "approval-always-label" }, always, `Always allow ${this.name} in this conversation`),
      keys,
    );
    const text = String(preview ?? "");
    const diff = isDiff(text);
    const kind = diff ? "change" : this.name === "delete_file" ? "file" : "command";
    const notes = (warnings ?? []).map((warning) => h("li", { text: `This ${kind} ${warning}.` }));
    const question = diff ? "The agent wants to make this change. Allow it?"
      : this.name === "delete_file" ? "The agent wants to delete this. Allow it?"
        : PREVIEW_LANGUAGES[this.name] ? "The agent wants to run this. Allow it?" : `The agent wants to use ${this.name}. Allow it?`;
    const box = h(
      "section",
      {
        class: "tool-approval", tabindex: "0", "data-testid": "approval",
        "aria-label": `Approval for ${this.name}: Enter or Y approves, Escape or N rejects`,
      },
      h("p", { class: "approval-title" }, icon("alert"), question),
      notes.length ? h("ul", { class: "approval-warnings", role: "alert" }, notes) : null,
      previewBlock(text, (part) => (diff ? renderDiff(part) : codeBlock(part, PREVIEW_LANGUAGES[this.name] ?? "plaintext"))),
      actions,
      error,
    );
    let keysFrom = 0;
    const decide = async (approved) => {
      for (const control of [approve, reject, always]) control.disabled = true;
      error.hidden = true;
      const ack = await this.onApprove(approved, always.checked).catch((err) => ({ ok: false, error: { message: String(err?.message ?? err) } }));
      if (ack?.ok === false) {
        for (const control of [approve, reject, always]) control.disabled = false;
        error.textContent = `Could not send the decision: ${ack.error?.message ?? "unknown error"}`;
        error.hidden = false;
        return;
      }
      box.classList.add("decided");
      this.rejected = !approved;
      actions.replaceChildren(h("span", { class: `approval-decision ${approved ? "approved" : "rejected"}` },
        approved ? `Approved${always.checked ? " (always for this tool)" : ""}` : "Rejected"));
      if (this.state === "approval") this.setState("running");
      if (approved && this.state === "running") this.#startClock();
      if (box.contains(document.activeElement)) box.dispatchEvent(new CustomEvent("approval-decided", { bubbles: true }));
    };
    approve.addEventListener("click", () => decide(true));
    reject.addEventListener("click", () => decide(false));
    box.addEventListener("keydown", (event) => {
      if (box.classList.contains("decided") || approve.disabled || event.repeat) return;
      if (event.ctrlKey || event.metaKey || event.altKey || performance.now() < keysFrom) return;
      const key = event.key.toLowerCase();
      const onButton = event.target instanceof HTMLButtonElement;
      if ((key === "enter" && !onButton) || key === "y") {
        event.preventDefault();
        decide(true);
      } else if (key === "escape" || key === "n") {
        event.preventDefault(); // Esc here answers the call; it does not stop the task
        decide(false);
      }
    });
    this.approval?.remove();
    this.approval = box;
    this.args.after(box);
    if (this.parsedArgs !== undefined) this.#renderArgs();
    if (!typingElsewhere()) {
      box.focus({ preventScroll: true });
      keysFrom = performance.now() + KEY_GUARD_MS;
    }
  }

  /** Where the sub-agent this call hands work to shows it (made at its first event): its answers,
   * thinking and tool cards, labelled with its name. */
  nest(agent) {
    if (!this.nestedBody) {
      this.nestedBody = h("div", { class: "sub-agent-body" });
      this.nestedLabel = h("span", { class: "sub-agent-count" });
      this.nested = h(
        "details",
        { class: "sub-agent", open: true, "data-agent": agent ?? "" },
        h("summary", { class: "sub-agent-head" }, icon("chevron", "sub-agent-chevron"),
          h("span", { class: "sub-agent-arrow", "aria-hidden": "true", text: "↳" }),
          h("span", { class: "sub-agent-name", text: agent ?? "sub-agent" }), this.nestedLabel),
        this.nestedBody,
      );
      this.body.insertBefore(this.nested, this.body.querySelector(".tool-output"));
      this.toggle(true);
    }
    return this.nestedBody;
  }

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
   * @param {{ok?: boolean, output?: string, duration_ms?: number}} result */
  setResult({ ok, output, duration_ms: durationMs }) {
    this.#stopClock();
    this.liveOutput?.remove();
    this.liveOutput = null;
    const rejected = ok === false && (this.rejected || DECLINED.test(String(output ?? "")));
    this.setState(rejected ? "rejected" : ok === false ? "failed" : "ok");
    this.duration.textContent = durationMs === undefined || durationMs === null || rejected ? "" : formatDuration(durationMs);
    const text = String(output ?? "");
    const lines = text ? text.split("\n").length : 0;
    const details = h(
      "details",
      { class: "tool-output", open: !rejected && (ok === false || lines <= OPEN_OUTPUT_LINES) },
      h("summary", {}, text ? `Output · ${lines} line${lines === 1 ? "" : "s"}` : "No output"),
      text ? h("pre", {}, linkPaths(text)) : null,
    );
    this.body.querySelector(".tool-output")?.remove();
    this.body.append(details);
    if (this.nested) {
      // The sub-agent's work folds away; its report (the output) stays in sight.
      const calls = this.nestedBody.querySelectorAll(".tool-card").length;
      this.nestedLabel.textContent = calls ? ` · ${calls} tool call${calls === 1 ? "" : "s"}` : "";
      this.nested.open = false;
      details.open = true;
    }
    if (ok !== false && !this.delegates) this.toggle(false);
  }

  /** Put a box (a proposed edit) above the output; open the card when the box needs the user. */
  attach(el, open) {
    this.extra?.remove();
    this.extra = el;
    const output = this.body.querySelector(".tool-output");
    if (output) output.open = false;
    this.body.insertBefore(el, output);
    if (open) this.toggle(true);
  }

  /** The task ended while this call was still running or waiting. */
  interrupt(label) {
    this.#stopClock();
    if (this.state === "running" || this.state === "approval") {
      this.approval?.querySelectorAll("button, input").forEach((control) => { control.disabled = true; });
      this.approval?.classList.add("decided");
      if (this.liveArgs) {
        try {
          this.setArguments(JSON.parse(this.liveArgs.data));
        } catch {
          // Arguments cut off mid-stream stay as raw text.
        }
      }
      this.setState("failed", label);
    }
  }
}
