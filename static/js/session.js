// @ts-check
// Which conversation is open and what the page shows and does with it: its events, sending, branching,
// undo, and what it keeps (mode, approval, agent, focus files, how its tasks ended). Event order: taskfeed.js.
import { buildIndex, newestLeafUnder, pathTo, summaryOf } from "./history.js";
import { TaskFeed } from "./taskfeed.js";
import { settleOtherBranch } from "./branching.js";
import { askUndoTask } from "./undoprompts.js";

/** @typedef {import("./events.js").ServerEventArgs} ServerEventArgs */
/** @typedef {import("./events.js").CoreEventArgs} CoreEventArgs */
/** @typedef {import("./events.js").ConversationUpdate} ConversationUpdate */
/** @typedef {import("./events.js").ContextEvent} ContextEvent */
/** @typedef {(event: string, payload?: object, timeoutMs?: number) => Promise<any>} Request */
/**
 * @typedef {object} SessionParts
 * @property {{request: Request}} conn
 * @property {import("./chat.js").ChatView} chat
 * @property {import("./conversations.js").ConversationList} conversations
 * @property {import("./statusbar.js").StatusBar} statusBar
 * @property {import("./filetree.js").FileTree} tree
 * @property {import("./composer.js").Composer} composer
 * @property {(cid: string | null) => void} onOpen
 */
/**
 * How a message is sent (all optional): parentId its parent (a branch; null: at the root), skill the skill it runs
 * with, typed what the user typed (put back on failure), attachments the files sent with it, budgetOverride
 * send_message's budget_override (a higher limit for this task only).
 * @typedef {{parentId?: string | null, skill?: string, typed?: string, attachments?: Array<{path: string}>, budgetOverride?: object}} SendOptions
 */

const LIST_EDITS_TIMEOUT_MS = 5000;

function failure(error, code = "request_failed") {
  return { ok: false, error: { code, message: error?.message ?? String(error) } };
}

export class Session {
  /** parts: {conn, chat, conversations, statusBar, tree, composer, onOpen(cid)}.
   * @param {SessionParts} parts */
  constructor(parts) {
    this.conn = parts.conn;
    this.chat = parts.chat;
    this.conversations = parts.conversations;
    this.statusBar = parts.statusBar;
    this.tree = parts.tree;
    this.composer = parts.composer;
    this.onOpen = parts.onOpen;
    this.cid = null;
    this.index = null;
    this.viewLeaf = null;
    this.feed = new TaskFeed({
      request: this.#request,
      openCid: () => this.cid,
      deliver: (...event) => this.handleEvent(...event),
      runningChanged: (cid) => this.#runningChanged(cid),
      reload: (cid) => this.open(cid),
      joinFailed: (message) => this.chat.showNotice(`Live updates unavailable: ${message}`),
    });
    this.undoable = []; // the open conversation's undoable task ids, newest first
    this.ends = {}; // user message id -> how its task ended: {reason, usage}
    this.focus = []; // the open conversation's focus files (a new one's: sent with its first message)
    this.contextLimit = null;
    this.modelReads = 0; // get_conversation requests made: only the newest one's answer is kept
    const { mode, approval, agent } = this.composer.els;
    for (const el of [mode, approval, agent]) el.addEventListener("change", () => this.showChoices());
  }

  /** The status bar says what the next task runs with: the composer's choices. */
  showChoices() {
    const { mode, approval } = this.composer;
    this.statusBar.setChoices({ mode, approval, agent: this.composer.agent ?? this.conversationAgent ?? null });
  }

  /** A request whose failure (a timeout, a lost connection) comes back as an ack. */
  #request = async (event, payload, timeoutMs) => {
    try {
      return await this.conn.request(event, payload, timeoutMs);
    } catch (error) {
      return failure(error, "timeout");
    }
  };

  // ---- server events --------------------------------------------------------------------

  /** A server event (connection.js), or one held back and delivered now (taskfeed.js).
   * @param {ServerEventArgs} event */
  handleEvent(...event) {
    if (event[0] === "conversation_update") return void this.#onConversationUpdate(event[1]);
    const [name, payload] = event; // one of core/events.py's
    const cid = payload.conversation_id ?? null;
    if (!cid) {
      if (name === "file_tree") this.tree.apply(payload.changes ?? [], payload.refresh ?? []);
      else if (name === "error") this.chat.onError(payload);
      else if (name === "notice" && payload.code === "live_tree_stopped") this.tree.showStopped(payload.message ?? "");
      return;
    }
    if (!this.feed.admit(cid, ...event)) return;
    if (name === "done") this.conversations.refresh();
    if (name === "file_tree") return void this.tree.apply(payload.changes ?? [], payload.refresh ?? []);
    if (cid !== this.cid) return;
    this.#dispatch(...event);
  }

  /** @param {CoreEventArgs} event */
  #dispatch(...[name, payload]) {
    const top = !payload.parent_call_id; // not a sub-agent's
    if (top && payload.agent && payload.agent !== this.statusBar.agent) this.statusBar.setAgent(payload.agent);
    switch (name) {
      case "token": this.chat.onToken(payload); break;
      case "thinking":
        this.chat.onThinking(payload);
        this.statusBar.setReasoning(top ? null : payload.agent);
        break;
      case "tool": this.chat.onTool(payload); break;
      case "plan": this.chat.onPlan(payload); break;
      case "error": this.chat.onError(payload); break;
      case "notice": this.chat.showNotice(payload.message ?? "", "info"); break;
      case "context": this.#onContext(payload); break;
      case "status":
        this.chat.onStatus(payload);
        this.statusBar.setTask(payload.state, payload.iteration, top ? null : payload.agent);
        if (payload.context && top) this.statusBar.setContext(payload.context);
        if (payload.usage) this.statusBar.setSpend({ task: payload.usage });
        break;
      case "done":
        this.chat.onDone(payload);
        this.statusBar.setTask("idle");
        this.#refreshModel(this.cid);
        break;
      default: break;
    }
  }

  #runningChanged(cid) {
    const running = this.feed.isRunning(cid);
    this.conversations.setRunning(cid, running);
    if (cid !== this.cid) return;
    this.composer.setRunning(running);
    this.chat.setEditable(!running);
    if (running) this.chat.setBusy(true);
    else this.chat.safety.place(); // the Undo its end guessed waited for the task to stop running
    if (this.index) this.chat.decorate(this.index);
  }

  // ---- opening and joining ------------------------------------------------------------------

  newConversation() {
    this.cid = null;
    this.index = null;
    this.viewLeaf = null;
    this.feed.dropJoin();
    this.ends = {};
    this.undoable = [];
    this.conversationAgent = null;
    this.chat.showWelcome();
    this.statusBar.resetTask();
    this.composer.setAgent(null);
    this.showChoices();
    this.#setFocus([]);
    this.composer.setRunning(false);
    this.onOpen(null);
  }

  /** Another tab (or this one) renamed, deleted, started or finished a conversation.
   * @param {ConversationUpdate} update */
  #onConversationUpdate(update) {
    const id = update.id;
    if (!id) return;
    if (update.deleted) {
      this.conversations.remove(id);
      return;
    }
    if (typeof update.running === "boolean" && (id !== this.cid || !update.running)) {
      this.conversations.setRunning(id, update.running || this.feed.isRunning(id));
    }
    if (update.title !== undefined) this.conversations.setTitle(id, update.title);
  }

  /** The open conversation was deleted (here or in another tab). */
  deleted(cid) {
    this.feed.forget(cid);
    if (cid !== this.cid) return;
    this.newConversation();
    this.chat.showNotice("This conversation was deleted.", "info");
  }

  async open(cid) {
    this.cid = cid;
    this.index = null;
    this.feed.dropJoin();
    this.onOpen(cid);
    this.chat.showLoading();
    this.statusBar.resetTask();
    this.#runningChanged(cid);
    this.modelReads += 1;
    const asOf = this.chat.safety.ends;
    const [res, edits] = await Promise.all([
      this.#request("get_conversation", { conversation_id: cid }),
      this.#request("list_edits", { conversation_id: cid }, LIST_EDITS_TIMEOUT_MS),
    ]);
    if (this.cid !== cid) return;
    if (!res.ok) {
      this.chat.reset();
      this.chat.showNotice(`Could not open this conversation: ${res.error?.message ?? "unknown error"}`);
      return;
    }
    this.index = buildIndex(res.messages ?? []);
    this.viewLeaf = this.index.latestLeaf;
    this.#applyChoices(res);
    this.#keep(res);
    const running = res.running === true;
    this.feed.setRunning(cid, running, { quiet: true }); // shown below, once rendered
    this.chat.setEditable(!running);
    this.chat.safety.setPendingEdits(edits.ok ? (edits.edits ?? []).map((edit) => edit.id) : null);
    this.chat.safety.setUndoable(res.undoable, asOf);
    // The messages cover every event up to res.seq; the join replays exactly the ones after it.
    this.#render({ running });
    if (res.status) {
      this.statusBar.setTask(res.status.state, res.status.iteration);
      this.statusBar.setContext(res.status.context);
      if (res.status.usage) this.statusBar.setSpend({ task: res.status.usage });
    }
    this.#runningChanged(cid);
    await this.feed.join(cid, Number.isInteger(res.seq) ? res.seq : 0);
  }

  /** Called on every (re)connection after the first: catch up on what was missed. */
  resync() {
    this.feed.resync();
  }

  async #refreshModel(cid) {
    const read = ++this.modelReads;
    const asOf = this.chat.safety.ends;
    const res = await this.#request("get_conversation", { conversation_id: cid });
    // Handlers run in threads: an earlier read (a stopped task's done) may answer after a later
    // one (its retry's done) and would bring back a branch without the retried message.
    if (this.cid !== cid || !res.ok || read !== this.modelReads) return;
    this.index = buildIndex(res.messages ?? []);
    this.viewLeaf = this.index.latestLeaf;
    this.#keep(res);
    this.chat.decorate(this.index);
    this.chat.safety.setUndoable(res.undoable, asOf);
    // The meter keeps the figure the task's last status gave: its own stored usage may be lower.
  }

  /** Mode, approval and agent of the opened conversation go into the composer (and so the status bar). */
  #applyChoices(res) {
    const { mode, approval } = this.composer.els;
    const set = (el, prop, value) => {
      if (el[prop] === value) return;
      el[prop] = value;
      el.dispatchEvent(new Event("change"));
    };
    if (res.mode) set(mode, "checked", res.mode === "thinking");
    if (res.approval && [...approval.options].some((option) => option.value === res.approval)) set(approval, "value", res.approval);
    this.conversationAgent = res.agent ?? res.conversation?.meta?.agent ?? null;
    this.composer.setAgent(this.conversationAgent);
    this.showChoices();
  }

  /** What get_conversation says the conversation keeps besides its messages. */
  #keep(res) {
    this.ends = res.conversation?.meta?.task_ends ?? {};
    this.undoable = Array.isArray(res.undoable) ? res.undoable : [];
    if (Number.isInteger(res.context_limit)) this.contextLimit = res.context_limit;
    if (Array.isArray(res.focus)) this.#setFocus(res.focus);
    if (res.spend) this.statusBar.setSpend({ conversation: res.spend.conversation, today: res.spend.today, task: res.status?.usage ?? null });
  }

  /** Render the shown branch with how its tasks ended, and its context use. */
  #render(options) {
    this.chat.renderHistory(this.index, this.viewLeaf, options);
    this.chat.markTaskEnds(this.ends);
    if (!options?.running) this.statusBar.setContext(this.#storedContext());
  }

  /** The context the branch's last model call used (its prompt and its answer), from the stored usage,
   * or what a later summary left of it. */
  #storedContext() {
    if (!this.index || !this.contextLimit) return null;
    const last = pathTo(this.index, this.viewLeaf).findLast((record) => (record.role === "assistant" && record.meta?.usage) || summaryOf(record));
    if (!last) return null;
    if (summaryOf(last)) return { used_tokens: summaryOf(last).tokens_after, limit_tokens: this.contextLimit };
    const { prompt_tokens: prompt = 0, completion_tokens: completion = 0 } = last.meta.usage;
    return { used_tokens: prompt + completion, limit_tokens: this.contextLimit };
  }

  // ---- focus files ---------------------------------------------------------------------------

  #setFocus(paths) {
    this.focus = paths;
    this.tree.setFocus(paths);
    this.statusBar.setFocus(paths, (path) => this.setFocused(path, false));
  }

  /** Pin a file for every model call of the open conversation (up to three), or unpin it. */
  async setFocused(path, focused) {
    if (!this.cid) {
      if (focused && this.focus.length >= 3) return void this.composer.showError("At most three files can be in focus: unpin one first.");
      this.#setFocus(focused ? [...new Set([...this.focus, path])] : this.focus.filter((p) => p !== path));
      return;
    }
    const cid = this.cid;
    const ack = await this.#request(focused ? "focus_file" : "unfocus_file", { conversation_id: cid, path });
    if (this.cid !== cid) return;
    if (ack.ok) this.#setFocus(ack.focus ?? []);
    else this.composer.showError(`Could not ${focused ? "focus" : "unfocus"} ${path}: ${ack.error?.message ?? "unknown error"}`);
  }

  // ---- user actions ----------------------------------------------------------------------

  /** Send a message (parentId: branch from that message; null: branch at the root; skill: with that
   * skill; typed: what the user typed, put back on failure; budgetOverride: send_message's budget_override, a
   * higher limit for this task only). Resolves to ok.
   * @param {string} text
   * @param {SendOptions} [options]
   * @returns {Promise<boolean>} */
  async send(text, { parentId, skill, typed, attachments, budgetOverride } = {}) {
    const cid = this.cid;
    /** @type {Record<string, unknown>} */
    const payload = { conversation_id: cid, text, ...this.composer.choices };
    if (this.composer.agent) payload.agent = this.composer.agent;
    if (skill) payload.skill = skill;
    if (budgetOverride) payload.budget_override = budgetOverride;
    if (attachments?.length) payload.attachments = attachments.map((attachment) => attachment.path);
    if (!cid && this.focus.length) payload.focus = this.focus;
    if (parentId !== undefined) payload.parent_id = parentId;
    else if (this.index && this.viewLeaf && this.viewLeaf !== this.index.latestLeaf) payload.parent_id = this.viewLeaf;
    const message = this.chat.addUserMessage(text, { skill, attachments });
    const doneBefore = this.feed.sending(!cid);
    const ack = await this.#request("send_message", payload, 30_000);
    const { held, doneSince } = this.feed.sent(!cid, doneBefore);
    if (!ack.ok) {
      this.chat.removeUserMessage(message);
      if (!this.chat.views.length && !this.cid) this.chat.showWelcome();
      this.composer.showError(ack.error?.message ?? "The message was not accepted.", typed ?? text);
      for (const event of held) this.handleEvent(...event);
      return false;
    }
    if (!cid && this.cid === null) {
      this.cid = ack.conversation_id;
      this.onOpen(this.cid);
    }
    message.setPending(false);
    if (ack.message_id) message.el.dataset.messageId = ack.message_id;
    this.chat.safety.place();
    this.conversations.refresh();
    // A task so short that its `done` beat the ack is not running any more.
    if (this.cid === ack.conversation_id && !doneSince) this.feed.setRunning(this.cid, true);
    for (const event of held) this.handleEvent(...event);
    return true;
  }

  /** Send an edited message as a new branch (branching.js settles what the tasks it leaves behind changed). */
  async edit(record, text) {
    if (this.feed.isRunning(this.cid)) return;
    const cid = this.cid;
    const notice = await settleOtherBranch(this, this.#request, record);
    if (notice === null || this.cid !== cid) return;
    this.chat.truncateFrom(record);
    if (notice) this.chat.showNotice(notice, "info").dataset.testid = "other-branch-notice";
    const ok = await this.send(text, { parentId: record.parent_id ?? null, skill: record.meta?.skill, attachments: record.meta?.attachments });
    if (!ok && this.index) this.#render();
  }

  /** Before "Undo this task": list what it will remove, restore and leave, and ask (null, or {overwrite}). */
  confirmUndo(messageId) {
    return askUndoTask(this.#request, this.cid, messageId);
  }

  switchBranch(recordId) {
    if (!this.index || this.feed.isRunning(this.cid)) return;
    this.viewLeaf = newestLeafUnder(this.index, recordId);
    this.#render();
  }

  /** Summarise the older turns now (or before the running task's next model call). */
  async compact() {
    const cid = this.cid;
    if (!cid) return;
    const ack = await this.#request("compact", { conversation_id: cid }, 30_000);
    if (this.cid !== cid) return;
    if (!ack.ok) this.chat.showNotice(ack.error?.message ?? "The context could not be condensed.", "info");
    else if (ack.scheduled) this.chat.showNotice("The context will be condensed before the agent's next step.", "info");
  }

  /** @param {ContextEvent} payload */
  #onContext(payload) {
    this.statusBar.setCondensing(payload.phase === "condensing");
    if (payload.phase !== "condensed") return void this.chat.onContext(payload);
    this.statusBar.setContext({ used_tokens: payload.tokens_after, limit_tokens: payload.limit_tokens });
    if (!this.chat.onContext(payload)) this.open(this.cid); // the first kept message is not shown here
    else if (!this.feed.isRunning(this.cid)) this.#refreshModel(this.cid);
  }

  async cancel() {
    if (!this.cid || !this.feed.isRunning(this.cid)) return;
    const ack = await this.#request("cancel", { conversation_id: this.cid });
    if (ack.ok === false) this.composer.showError(`Could not stop: ${ack.error?.message ?? "unknown error"}`);
  }

  approve(callId, approved, always) {
    return this.#request("approve", { conversation_id: this.cid, call_id: callId, approved, always });
  }
}
