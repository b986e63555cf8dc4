// @ts-check
// When the agent needs the user: the tab title says a call waits for approval, or that a task ended while
// the tab was hidden; with the user's consent (the bell), a desktop notification says it too.
const APP = "Workspace Agent";
const STORAGE_KEY = "workspace-agent.notifications";
const WAITING = "(!) Approval needed";
const ENDED = { complete: "✓ Done", cancelled: "■ Stopped", max_iterations: "■ Stopped", error: "✕ Failed", interrupted: "■ Interrupted", budget: "■ Stopped", loop: "■ Stopped" };
const ENDED_TEXT = {
  complete: "The task is done.",
  cancelled: "The task was stopped.",
  max_iterations: "The task reached its step limit.",
  error: "The task ended with an error.",
  interrupted: "The task was interrupted: the server stopped.",
  budget: "The task was stopped: a budget was reached.",
  loop: "The task was stopped: the model kept repeating itself.",
};
const BELL_TITLE = {
  on: "Desktop notifications are on: you hear from the agent when it needs approval or finishes while this tab is hidden. Click to turn them off.",
  off: "Notify me when the agent needs approval or finishes while this tab is hidden",
  denied: "Notifications are blocked for this page: allow them in the browser's site settings, then click here.",
};
const SEEN_LIMIT = 200;

/** @typedef {import("./events.js").ServerEventArgs} ServerEventArgs */
/** @typedef {import("./events.js").DoneEvent} DoneEvent */

export class Attention {
  /** bell: the notification toggle; titleOf(cid): a conversation's title; onShow(cid): show that conversation. */
  constructor(bell, options) {
    this.bell = bell;
    this.options = options;
    this.base = APP;
    this.waiting = new Map(); // call_id -> conversation_id, while the call waits for the user
    this.ended = null; // what the title says about a task that ended out of sight, until the tab is seen
    this.seenDone = new Set(); // a replay repeats events: each task end is told once
    this.supported = "Notification" in window;
    this.enabled = this.supported && localStorage.getItem(STORAGE_KEY) === "on" && Notification.permission === "granted";
    if (this.supported) {
      bell.hidden = false;
      bell.addEventListener("click", () => this.#toggle());
    }
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) return;
      this.ended = null;
      this.#render();
    });
    this.#renderBell();
  }

  /** The page's own title (the conversation's), shown after what needs the user. */
  setBase(title) {
    this.base = title ? `${title} · ${APP}` : APP;
    this.#render();
  }

  /** Every server event, before the page handles it.
   * @param {ServerEventArgs} event */
  onEvent(...event) {
    if (event[0] === "conversation_update") return; // of no task
    const [name, payload] = event;
    const cid = payload?.conversation_id;
    if (!cid) return;
    if (name === "tool" && payload.phase === "approval") {
      if (!this.waiting.has(payload.call_id)) {
        this.waiting.set(payload.call_id, cid);
        this.#notify("Approval needed", `${payload.name}: ${firstLine(payload.preview)}`, cid, `approval-${payload.call_id}`);
      }
    } else if (name === "tool" && (payload.phase === "output" || payload.phase === "result")) {
      this.waiting.delete(payload.call_id);
    } else if (name === "done" && !payload.parent_call_id) {
      this.#taskEnded(cid, payload);
    }
    this.#render();
  }

  /** The user answered a call (the answer reached the server). */
  resolved(callId) {
    this.waiting.delete(callId);
    this.#render();
  }

  /** @param {string} cid
   * @param {DoneEvent} payload */
  #taskEnded(cid, payload) {
    const key = `${cid}:${payload.seq}`;
    if (this.seenDone.has(key)) return;
    this.seenDone.add(key);
    if (this.seenDone.size > SEEN_LIMIT) this.seenDone.delete(this.seenDone.values().next().value);
    for (const [callId, owner] of this.waiting) if (owner === cid) this.waiting.delete(callId);
    if (!document.hidden) return;
    const reason = payload.reason ?? "complete";
    this.ended = ENDED[reason] ?? ENDED.error;
    this.#notify(ENDED_TEXT[reason] ?? ENDED_TEXT.error, this.options.titleOf(cid) ?? "Conversation", cid, `done-${cid}`);
  }

  #render() {
    const flag = this.waiting.size ? WAITING : this.ended;
    const title = flag ? `${flag} · ${this.base}` : this.base;
    if (document.title !== title) document.title = title;  // called on every event
  }

  #notify(title, body, cid, tag) {
    if (!this.enabled || !document.hidden || Notification.permission !== "granted") return;
    const notice = new Notification(title, { body, tag });
    notice.addEventListener("click", () => {
      window.focus();
      this.options.onShow(cid);
      notice.close();
    });
  }

  async #toggle() {
    if (this.enabled) {
      this.enabled = false;
    } else {
      const permission = Notification.permission === "default" ? await Notification.requestPermission() : Notification.permission;
      this.enabled = permission === "granted";
    }
    localStorage.setItem(STORAGE_KEY, this.enabled ? "on" : "off");
    this.#renderBell();
  }

  #renderBell() {
    if (!this.supported) return;
    const denied = Notification.permission === "denied";
    const state = this.enabled ? "on" : denied ? "denied" : "off";
    this.bell.setAttribute("aria-pressed", String(this.enabled));
    this.bell.toggleAttribute("data-blocked", denied);
    this.bell.title = BELL_TITLE[state];
    this.bell.setAttribute("aria-label", this.enabled ? "Desktop notifications: on" : "Desktop notifications: off");
  }
}

function firstLine(text) {
  const line = String(text ?? "").split("\n").find((part) => part.trim()) ?? "";
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}
