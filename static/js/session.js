// Which conversation is open, its task events (seq tracking, replay on join/reconnect), sending and branching,
// and what it keeps: mode, approval, agent, focus files, how its tasks ended.
import { choose, fileList, UNDO_VERBS } from "./dialog.js";
import { h } from "./dom.js";
import { buildIndex, newestLeafUnder, pathTo, summaryOf } from "./history.js";

const LIST_EDITS_TIMEOUT_MS = 5000;
const RUNNING_EVENTS = new Set(["token", "thinking", "tool"]);

function failure(error, code = "request_failed") {
  return { ok: false, error: { code, message: error?.message ?? String(error) } };
}

export class Session {
  /** parts: {conn, chat, conversations, statusBar, tree, composer, onOpen(cid)}. */
  constructor(parts) {
    Object.assign(this, parts);
    this.cid = null;
    this.index = null;
    this.viewLeaf = null;
    this.seqs = new Map();
    this.running = new Set();
    this.joining = null;
    this.pendingNew = null;
    this.doneCount = 0;
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

  async #request(event, payload, timeoutMs) {
    try {
      return await this.conn.request(event, payload, timeoutMs);
    } catch (error) {
      return failure(error, "timeout");
    }
  }

  // ---- server events --------------------------------------------------------------------

  handleEvent(name, payload) {
    if (name === "conversation_update") return void this.#onConversationUpdate(payload);
    const cid = payload.conversation_id ?? null;
    if (!cid) {
      if (name === "file_tree") this.tree.apply(payload.changes ?? []);
      else if (name === "error") this.chat.onError(payload);
      return;
    }
    if (this.pendingNew && cid !== this.cid) return void this.pendingNew.push([name, payload]);
    if (this.joining?.cid === cid) return void this.joining.buffer.push([name, payload]);
    const seq = Number.isInteger(payload.seq) ? payload.seq : null;
    if (seq !== null) {
      if (seq <= (this.seqs.get(cid) ?? 0)) return;
      this.seqs.set(cid, seq);
    }
    this.#trackRunning(cid, name, payload);
    if (name === "file_tree") return void this.tree.apply(payload.changes ?? []);
    if (cid !== this.cid) return;
    this.#dispatch(name, payload);
  }

  #dispatch(name, payload) {
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
        break;
      case "done":
        this.chat.onDone(payload);
        this.statusBar.setTask("idle");
        this.#refreshModel(this.cid);
        break;
      default: break;
    }
  }

  #trackRunning(cid, name, payload) {
    const was = this.running.has(cid);
    if (name === "done") {
      this.running.delete(cid);
      this.doneCount += 1;
    } else if (RUNNING_EVENTS.has(name) || (name === "status" && payload.state !== "idle")) this.running.add(cid);
    const now = this.running.has(cid);
    if (name === "done") this.conversations.refresh();
    if (was !== now) this.#runningChanged(cid);
  }

  #runningChanged(cid) {
    this.conversations.setRunning(cid, this.running.has(cid));
    if (cid !== this.cid) return;
    const running = this.running.has(cid);
    this.composer.setRunning(running);
    this.chat.setEditable(!running);
    if (running) this.chat.setBusy(true);
    if (this.index) this.chat.decorate(this.index);
  }

  // ---- opening and joining ------------------------------------------------------------------

  newConversation() {
    this.cid = null;
    this.index = null;
    this.viewLeaf = null;
    this.joining = null;
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

  /** Another tab (or this one) renamed, deleted, started or finished a conversation. */
  #onConversationUpdate(update) {
    const id = update.id;
    if (!id) return;
    if (update.deleted) {
      this.conversations.remove(id);
      return;
    }
    if (typeof update.running === "boolean" && (id !== this.cid || !update.running)) {
      this.conversations.setRunning(id, update.running || this.running.has(id));
    }
    if (update.title !== undefined) this.conversations.setTitle(id, update.title);
  }

  /** The open conversation was deleted (here or in another tab). */
  deleted(cid) {
    this.running.delete(cid);
    this.seqs.delete(cid);
    if (cid !== this.cid) return;
    this.newConversation();
    this.chat.showNotice("This conversation was deleted.", "info");
  }

  async open(cid) {
    this.cid = cid;
    this.index = null;
    this.joining = null;
    this.onOpen(cid);
    this.chat.showLoading();
    this.statusBar.resetTask();
    this.#runningChanged(cid);
    this.modelReads += 1;
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
    if (running) this.running.add(cid);
    else this.running.delete(cid);
    this.chat.setEditable(!running);
    this.chat.safety.setPendingEdits(edits.ok ? (edits.edits ?? []).map((edit) => edit.id) : null);
    this.chat.safety.setUndoable(res.undoable);
    // The messages cover every event up to res.seq; the join replays exactly the ones after it.
    this.#render({ running });
    if (res.status) {
      this.statusBar.setTask(res.status.state, res.status.iteration);
      this.statusBar.setContext(res.status.context);
    }
    this.#runningChanged(cid);
    await this.#join(cid, Number.isInteger(res.seq) ? res.seq : 0);
  }

  async #join(cid, afterSeq) {
    const joining = { cid, buffer: [] };
    this.joining = joining;
    this.seqs.set(cid, afterSeq);
    const wasRunning = this.running.has(cid);
    const ack = await this.#request("join", { conversation_id: cid, after_seq: afterSeq });
    if (this.joining !== joining) return;
    this.joining = null;
    if (ack.ok === false) {
      this.chat.showNotice(`Live updates unavailable: ${ack.error?.message ?? "join failed"}`);
      return;
    }
    const ended = joining.buffer.some(([name]) => name === "done");
    // The server started over (its seq is behind ours), no longer holds every event after ours,
    // or says the task we were following ended without its `done` reaching us: reload.
    const restarted = ack.last_seq < afterSeq;
    const gap = afterSeq < ack.replays_after;
    if (restarted || gap || (wasRunning && !ack.running && !ended)) {
      this.open(cid);
      return;
    }
    this.#setRunning(cid, ack.running === true || (wasRunning && !ended));
    for (const [name, payload] of joining.buffer) this.handleEvent(name, payload);
  }

  #setRunning(cid, running) {
    if (running === this.running.has(cid)) return;
    if (running) this.running.add(cid);
    else this.running.delete(cid);
    this.#runningChanged(cid);
  }

  /** Called on every (re)connection after the first: catch up on what was missed. */
  resync() {
    // A new socket is in no room: forget the seqs of conversations not re-joined (the server may have restarted).
    for (const cid of [...this.seqs.keys()]) {
      if (cid !== this.cid && !this.running.has(cid)) this.seqs.delete(cid);
    }
    for (const cid of this.running) {
      if (cid !== this.cid) this.#rejoinInBackground(cid);
    }
    if (!this.cid) return;
    const last = this.seqs.get(this.cid) ?? 0;
    if (last === 0) this.open(this.cid);
    else this.#join(this.cid, last);
  }

  /** Catch up on a conversation running out of view; all it shows is the running dot. */
  async #rejoinInBackground(cid) {
    const ours = this.seqs.get(cid) ?? 0;
    const ack = await this.#request("join", { conversation_id: cid, after_seq: ours });
    if (ack.running === true && ack.last_seq >= ours && ours >= ack.replays_after) return;
    this.seqs.delete(cid);
    this.#setRunning(cid, false);
  }

  async #refreshModel(cid) {
    const read = ++this.modelReads;
    const res = await this.#request("get_conversation", { conversation_id: cid });
    // Handlers run in threads: an earlier read (a stopped task's done) may answer after a later
    // one (its retry's done) and would bring back a branch without the retried message.
    if (this.cid !== cid || !res.ok || read !== this.modelReads) return;
    this.index = buildIndex(res.messages ?? []);
    this.viewLeaf = this.index.latestLeaf;
    this.#keep(res);
    this.chat.decorate(this.index);
    this.chat.safety.setUndoable(res.undoable);
    this.statusBar.setContext(this.#storedContext());
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
   * skill; typed: what the user typed, put back on failure). Resolves to ok. */
  async send(text, { parentId, skill, typed, attachments } = {}) {
    const cid = this.cid;
    const payload = { conversation_id: cid, text, mode: this.composer.mode, approval: this.composer.approval };
    if (this.composer.agent) payload.agent = this.composer.agent;
    if (skill) payload.skill = skill;
    if (attachments?.length) payload.attachments = attachments.map((attachment) => attachment.path);
    if (!cid && this.focus.length) payload.focus = this.focus;
    if (parentId !== undefined) payload.parent_id = parentId;
    else if (this.index && this.viewLeaf && this.viewLeaf !== this.index.latestLeaf) payload.parent_id = this.viewLeaf;
    const message = this.chat.addUserMessage(text, { skill, attachments });
    if (!cid) this.pendingNew = [];
    const doneBefore = this.doneCount;
    const ack = await this.#request("send_message", payload, 30_000);
    const buffered = this.pendingNew ?? [];
    if (!cid) this.pendingNew = null;
    if (!ack.ok) {
      this.chat.removeUserMessage(message);
      if (!this.chat.views.length && !this.cid) this.chat.showWelcome();
      this.composer.showError(ack.error?.message ?? "The message was not accepted.", typed ?? text);
      for (const [name, event] of buffered) this.handleEvent(name, event);
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
    if (this.cid === ack.conversation_id && !this.running.has(this.cid) && this.doneCount === doneBefore) {
      this.running.add(this.cid);
      this.#runningChanged(this.cid);
    }
    for (const [name, event] of buffered) this.handleEvent(name, event);
    return true;
  }

  /** Send an edited message as a new branch. The tasks from it on stay on the old branch: when they changed
   * files, offer to undo those changes first; kept, the page says the workspace still holds them. */
  async edit(record, text) {
    if (this.running.has(this.cid)) return;
    const cid = this.cid;
    const files = await this.#otherBranchChanges(record);
    if (this.cid !== cid) return;
    let kept = [];
    if (files.items.length) {
      const answer = await choose({
        title: "Undo the other branch's file changes?",
        body: [h("p", { text: "The tasks after this message changed these files. They stay on the other branch when you send this edit:" }),
          fileList(files.items, UNDO_VERBS)],
        choices: [{ label: "Keep the files", value: "keep" }, { label: "Undo them, then send", value: "undo", kind: "primary" }],
        testid: "branch-undo-dialog",
      });
      if (answer === null || this.cid !== cid) return;
      if (answer === "undo" && !(await this.#undoTasks(files.tasks))) return;
      if (answer === "keep") kept = files.items.map((file) => file.path);
    }
    this.chat.truncateFrom(record);
    if (kept.length) {
      this.chat.showNotice(`The workspace still holds the other branch's changes to ${kept.join(", ")}.`, "info")
        .dataset.testid = "other-branch-notice";
    }
    const ok = await this.send(text, { parentId: record.parent_id ?? null, skill: record.meta?.skill, attachments: record.meta?.attachments });
    if (!ok && this.index) this.#render();
  }

  /** The files the tasks from `record` on (on the shown branch) changed and could still undo. */
  async #otherBranchChanges(record) {
    const none = { items: [], tasks: [] };
    if (!this.index || !this.cid) return none;
    const path = pathTo(this.index, this.viewLeaf);
    const from = path.findIndex((entry) => entry.id === record.id);
    const undoable = new Set(this.undoable);
    const tasks = path.slice(Math.max(from, 0)).filter((entry) => entry.role === "user" && undoable.has(entry.id)).map((entry) => entry.id);
    if (!tasks.length) return none;
    const previews = await Promise.all(tasks.map((id) => this.#request("undo_preview", { conversation_id: this.cid, message_id: id })));
    const byPath = new Map(); // the oldest task's action wins: undoing them all ends where it began
    for (const preview of previews) for (const file of preview.ok ? preview.files ?? [] : []) if (!byPath.has(file.path)) byPath.set(file.path, file);
    return { items: [...byPath.values()], tasks };
  }

  /** Before "Undo this task": list what it will remove and restore, and ask. */
  async confirmUndo(messageId) {
    const preview = await this.#request("undo_preview", { conversation_id: this.cid, message_id: messageId });
    if (!preview.ok || !preview.files?.length) return true; // the undo itself says what there is
    const answer = await choose({
      title: "Undo this task?",
      body: [h("p", { text: "These files go back to how they were before the task:" }), fileList(preview.files, UNDO_VERBS)],
      choices: [{ label: "Undo", value: "undo", kind: "danger" }],
      testid: "undo-dialog",
    });
    return answer === "undo";
  }

  /** Undo tasks newest first; false (with the reason shown) when one could not be undone. */
  async #undoTasks(tasks) {
    for (const id of [...tasks].reverse()) {
      const ack = await this.#request("undo_task", { conversation_id: this.cid, message_id: id }, 30_000);
      if (!ack.ok) {
        this.composer.showError(`Could not undo the other branch's changes: ${ack.error?.message ?? "unknown error"}`);
        return false;
      }
    }
    this.undoable = this.undoable.filter((id) => !tasks.includes(id));
    this.chat.safety.setUndoable(this.undoable);
    this.tree.refresh();
    return true;
  }

  switchBranch(recordId) {
    if (!this.index || this.running.has(this.cid)) return;
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

  #onContext(payload) {
    this.statusBar.setCondensing(payload.phase === "condensing");
    if (payload.phase !== "condensed") return void this.chat.onContext(payload);
    this.statusBar.setContext({ used_tokens: payload.tokens_after, limit_tokens: payload.limit_tokens });
    if (!this.chat.onContext(payload)) this.open(this.cid); // the first kept message is not shown here
    else if (!this.running.has(this.cid)) this.#refreshModel(this.cid);
  }

  async cancel() {
    if (!this.cid || !this.running.has(this.cid)) return;
    const ack = await this.#request("cancel", { conversation_id: this.cid });
    if (ack.ok === false) this.composer.showError(`Could not stop: ${ack.error?.message ?? "unknown error"}`);
  }

  approve(callId, approved, always) {
    return this.#request("approve", { conversation_id: this.cid, call_id: callId, approved, always });
  }
}
