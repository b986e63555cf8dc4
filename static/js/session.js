// Which conversation is open, its task events (seq tracking, replay on join/reconnect), sending and branching.
import { buildIndex, newestLeafUnder } from "./history.js";

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
      case "thinking": this.chat.onThinking(payload); break;
      case "tool": this.chat.onTool(payload); break;
      case "plan": this.chat.onPlan(payload); break;
      case "error": this.chat.onError(payload); break;
      case "notice": this.chat.showNotice(payload.message ?? "", "info"); break;
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
    this.chat.showWelcome();
    this.statusBar.resetTask();
    this.statusBar.setAgent(null);
    this.composer.setAgent(null);
    this.composer.setRunning(false);
    this.onOpen(null);
  }

  async open(cid) {
    this.cid = cid;
    this.index = null;
    this.joining = null;
    this.onOpen(cid);
    this.chat.showLoading();
    this.statusBar.resetTask();
    this.#runningChanged(cid);
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
    const agent = res.conversation?.meta?.agent ?? null;
    this.composer.setAgent(agent);
    this.statusBar.setAgent(agent);
    const running = res.running === true;
    if (running) this.running.add(cid);
    else this.running.delete(cid);
    this.chat.setEditable(!running);
    this.chat.safety.setPendingEdits(edits.ok ? (edits.edits ?? []).map((edit) => edit.id) : null);
    this.chat.safety.setUndoable(res.undoable);
    // The messages cover every event up to res.seq; the join replays exactly the ones after it.
    this.chat.renderHistory(this.index, this.viewLeaf, { running });
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
    const res = await this.#request("get_conversation", { conversation_id: cid });
    if (this.cid !== cid || !res.ok) return;
    this.index = buildIndex(res.messages ?? []);
    this.viewLeaf = this.index.latestLeaf;
    this.chat.decorate(this.index);
    this.chat.safety.setUndoable(res.undoable);
  }

  // ---- user actions ----------------------------------------------------------------------

  /** Send a message (parentId: branch from that message; null: branch at the root; skill: with that
   * skill; typed: what the user typed, put back on failure). Resolves to ok. */
  async send(text, { parentId, skill, typed } = {}) {
    const cid = this.cid;
    const payload = { conversation_id: cid, text, mode: this.composer.mode, approval: this.composer.approval };
    if (this.composer.agent) payload.agent = this.composer.agent;
    if (skill) payload.skill = skill;
    if (parentId !== undefined) payload.parent_id = parentId;
    else if (this.index && this.viewLeaf && this.viewLeaf !== this.index.latestLeaf) payload.parent_id = this.viewLeaf;
    const message = this.chat.addUserMessage(text, { skill });
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

  async edit(record, text) {
    if (this.running.has(this.cid)) return;
    this.chat.truncateFrom(record);
    const ok = await this.send(text, { parentId: record.parent_id ?? null, skill: record.meta?.skill });
    if (!ok && this.index) this.chat.renderHistory(this.index, this.viewLeaf);
  }

  switchBranch(recordId) {
    if (!this.index || this.running.has(this.cid)) return;
    this.viewLeaf = newestLeafUnder(this.index, recordId);
    this.chat.renderHistory(this.index, this.viewLeaf);
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
