// @ts-check
// The open conversation: which one it is, what get_conversation says it holds (its records and the branch shown,
// how its tasks ended, what can be undone, its mode, approval and agent), and opening it. What the user does with
// it is done by a module of its own, through the entry points below: sending.js (messages, stop, approvals,
// condensing), branching.js (branches and edits), undo.js, focusfiles.js; its events: conversationevents.js, in
// seq order: taskfeed.js.
import { approveCall, cancelTask, compactContext, sendMessage } from "./sending.js";
import { editMessage, switchBranch } from "./branching.js";
import { ConversationEvents } from "./conversationevents.js";
import { FocusFiles } from "./focusfiles.js";
import { buildIndex, pathTo, summaryOf } from "./history.js";
import { TaskFeed } from "./taskfeed.js";
import { confirmUndo, undoTask } from "./undo.js";

/** @typedef {import("./events.js").ServerEventArgs} ServerEventArgs */
/** @typedef {import("./history.js").HistoryIndex} HistoryIndex */
/** @typedef {import("./history.js").MessageRecord} MessageRecord */
/** @typedef {import("./history.js").TaskEnd} TaskEnd */
/** @typedef {import("./requests.js").Request} Request */
/** @typedef {import("./requests.js").ConversationAck} ConversationAck */
/** @typedef {import("./sending.js").SendOptions} SendOptions */
/**
 * @typedef {object} SessionParts
 * @property {Request} request a request that may fail (connection.js): failures come back as acks here
 * @property {import("./chat.js").ChatView} chat
 * @property {import("./conversations.js").ConversationList} conversations
 * @property {import("./statusbar.js").StatusBar} statusBar
 * @property {import("./filetree.js").FileTree} tree
 * @property {import("./composer.js").Composer} composer
 * @property {(cid: string | null) => void} onOpen
 */

const LIST_EDITS_TIMEOUT_MS = 5000;

export class Session {
  /** @param {SessionParts} parts */
  constructor(parts) {
    this.request = parts.request;
    this.chat = parts.chat;
    this.conversations = parts.conversations;
    this.statusBar = parts.statusBar;
    this.tree = parts.tree;
    this.composer = parts.composer;
    this.onOpen = parts.onOpen;
    /** @type {string | null} */
    this.cid = null;
    /** @type {HistoryIndex | null} */
    this.index = null;
    /** @type {string | null} the newest record of the branch shown */
    this.viewLeaf = null;
    /** @type {string | null} the agent the conversation runs with */
    this.conversationAgent = null;
    /** @type {string[]} the open conversation's undoable task ids, newest first */
    this.undoable = [];
    /** @type {Record<string, TaskEnd>} user message id -> how its task ended */
    this.ends = {};
    /** @type {number | null} the model's context window, in tokens */
    this.contextLimit = null;
    this.modelReads = 0; // get_conversation requests made: only the newest one's answer is kept
    /** @type {Promise<void>} the newest refresh's read */
    this.refreshing = Promise.resolve();
    this.events = new ConversationEvents(this);
    this.feed = new TaskFeed({
      request: this.request,
      openCid: () => this.cid,
      deliver: (...event) => this.events.handle(...event),
      runningChanged: (cid) => this.events.runningChanged(cid),
      reload: (cid) => this.open(cid),
      joinFailed: (message) => this.chat.showNotice(`Live updates unavailable: ${message}`),
    });
    this.focus = new FocusFiles({
      request: this.request, cid: () => this.cid, tree: this.tree, statusBar: this.statusBar,
      showError: (message) => this.composer.showError(message),
    });
    const { mode, approval, agent } = this.composer.els;
    for (const el of [mode, approval, agent]) el.addEventListener("change", () => this.showChoices());
  }

  /** The status bar says what the next task runs with: the composer's choices. */
  showChoices() {
    const { mode, approval } = this.composer;
    this.statusBar.setChoices({ mode, approval, agent: this.composer.agent ?? this.conversationAgent ?? null });
  }

  /** A server event (connection.js).
   * @param {ServerEventArgs} event */
  handleEvent(...event) {
    this.events.handle(...event);
  }

  // ---- which conversation is open --------------------------------------------------------

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
    this.focus.show([]);
    this.composer.setRunning(false);
    this.onOpen(null);
  }

  /** The conversation a message just started (none was open) is the open one.
   * @param {string} cid */
  started(cid) {
    this.cid = cid;
    this.onOpen(cid);
  }

  /** The open conversation was deleted (here or in another tab).
   * @param {string} cid */
  deleted(cid) {
    this.feed.forget(cid);
    if (cid !== this.cid) return;
    this.newConversation();
    this.chat.showNotice("This conversation was deleted.", "info");
  }

  /** Show a conversation as get_conversation has it, then join it for the events after.
   * @param {string} cid */
  async open(cid) {
    this.cid = cid;
    this.index = null;
    this.feed.dropJoin();
    this.onOpen(cid);
    this.chat.showLoading();
    this.statusBar.resetTask();
    this.events.runningChanged(cid);
    this.modelReads += 1;
    const asOf = this.chat.safety.ends;
    const [res, edits] = await Promise.all([
      this.request("get_conversation", { conversation_id: cid }),
      this.request("list_edits", { conversation_id: cid }, LIST_EDITS_TIMEOUT_MS),
    ]);
    if (this.cid !== cid) return;
    if (!res.ok) {
      this.chat.reset();
      this.chat.showNotice(`Could not open this conversation: ${res.error?.message ?? "unknown error"}`);
      return;
    }
    this.#adopt(res);
    this.#applyChoices(res);
    const running = res.running === true;
    this.feed.setRunning(cid, running, { quiet: true }); // shown below, once rendered
    this.chat.setEditable(!running);
    this.chat.safety.setPendingEdits(edits.ok ? (edits.edits ?? []).map((edit) => edit.id) : null);
    this.chat.safety.setUndoable(res.undoable, asOf);
    // The messages cover every event up to res.seq; the join replays exactly the ones after it.
    this.render({ running });
    if (res.status) {
      this.statusBar.setTask(res.status.state, res.status.iteration);
      this.statusBar.setContext(res.status.context);
      if (res.status.usage) this.statusBar.setSpend({ task: res.status.usage });
    }
    this.events.runningChanged(cid);
    await this.feed.join(cid, Number.isInteger(res.seq) ? res.seq : 0);
  }

  /** Called on every (re)connection after the first: catch up on what was missed. */
  resync() {
    this.feed.resync();
  }

  /** Read the conversation again after its task ended (or its context was condensed): ids, branches and what
   * can be undone, on the messages shown.
   * @param {string | null} cid */
  refresh(cid) {
    this.refreshing = this.#refresh(cid);
    return this.refreshing;
  }

  /** Once the newest read of the conversation after a task's end is in (its records are what a Retry
   * sends again: before it, the page's index may not hold the message of the task just stopped). */
  async refreshed() {
    let awaited;
    do {
      awaited = this.refreshing;
      await awaited.catch(() => {}); // a read that failed leaves the index as it was
    } while (awaited !== this.refreshing);
  }

  /** @param {string | null} cid */
  async #refresh(cid) {
    const read = ++this.modelReads;
    const asOf = this.chat.safety.ends;
    const res = await this.request("get_conversation", { conversation_id: cid });
    // Handlers run in threads: an earlier read (a stopped task's done) may answer after a later
    // one (its retry's done) and would bring back a branch without the retried message.
    if (this.cid !== cid || !res.ok || read !== this.modelReads) return;
    this.#adopt(res);
    this.chat.decorate(this.index);
    this.chat.safety.setUndoable(res.undoable, asOf);
    // The meter keeps the figure the task's last status gave: its own stored usage may be lower.
  }

  /** What get_conversation says the conversation holds: its records (the newest branch shown), how its tasks
   * ended, what can be undone, its context window, focus files and spend.
   * @param {ConversationAck} res */
  #adopt(res) {
    this.index = buildIndex(res.messages ?? []);
    this.viewLeaf = this.index.latestLeaf;
    this.ends = res.conversation?.meta?.task_ends ?? {};
    this.undoable = Array.isArray(res.undoable) ? res.undoable : [];
    if (Number.isInteger(res.context_limit)) this.contextLimit = res.context_limit;
    if (Array.isArray(res.focus)) this.focus.show(res.focus);
    if (res.spend) this.statusBar.setSpend({ conversation: res.spend.conversation, today: res.spend.today, task: res.status?.usage ?? null });
  }

  /** Mode, approval and agent of the opened conversation go into the composer (and so the status bar).
   * @param {ConversationAck} res */
  #applyChoices(res) {
    const { mode, approval } = this.composer.els;
    if (res.mode && mode.checked !== (res.mode === "thinking")) {
      mode.checked = res.mode === "thinking";
      mode.dispatchEvent(new Event("change"));
    }
    const offered = [...approval.options].some((option) => option.value === res.approval);
    if (res.approval && offered && approval.value !== res.approval) {
      approval.value = res.approval;
      approval.dispatchEvent(new Event("change"));
    }
    this.conversationAgent = res.agent ?? res.conversation?.meta?.agent ?? null;
    this.composer.setAgent(this.conversationAgent);
    this.showChoices();
  }

  /** Render the shown branch with how its tasks ended, and its context use.
   * @param {{running?: boolean}} [options] running: a task still runs on it */
  render(options) {
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
    const summary = summaryOf(last);
    if (summary) return { used_tokens: summary.tokens_after, limit_tokens: this.contextLimit };
    const { prompt_tokens: prompt = 0, completion_tokens: completion = 0 } = last.meta.usage;
    return { used_tokens: prompt + completion, limit_tokens: this.contextLimit };
  }

  // ---- what the user does with it (each in its module) ---------------------------------------

  /** @param {string} text
   * @param {SendOptions} [options] */
  send(text, options) {
    return sendMessage(this, text, options);
  }

  /** @param {MessageRecord} record
   * @param {string} text */
  edit(record, text) {
    return editMessage(this, record, text);
  }

  /** @param {string} recordId */
  switchBranch(recordId) {
    switchBranch(this, recordId);
  }

  /** @param {string} messageId */
  confirmUndo(messageId) {
    return confirmUndo(this, messageId);
  }

  /** @param {string} messageId
   * @param {string[]} overwrite */
  undo(messageId, overwrite) {
    return undoTask(this, messageId, overwrite);
  }

  /** @param {string} path
   * @param {boolean} focused */
  setFocused(path, focused) {
    return this.focus.set(path, focused);
  }

  compact() {
    return compactContext(this);
  }

  cancel() {
    return cancelTask(this);
  }

  /** @param {string} callId
   * @param {boolean} approved
   * @param {boolean} always */
  approve(callId, approved, always) {
    return approveCall(this, callId, approved, always);
  }
}
