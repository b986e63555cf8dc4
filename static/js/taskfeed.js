// @ts-check
// The task events of the conversations this tab follows: each applied once and in seq order, which ones
// run, and joining a conversation's room to replay what was missed (on opening it, on every reconnection).
const RUNNING_EVENTS = new Set(["token", "thinking", "tool"]);

/** @typedef {import("./events.js").CoreEventArgs} CoreEventArgs */
/**
 * @typedef {object} FeedParts
 * @property {(event: string, payload?: object, timeoutMs?: number) => Promise<any>} request errors come back as acks
 * @property {() => string | null} openCid
 * @property {(...event: CoreEventArgs) => void} deliver
 * @property {(cid: string) => void} runningChanged
 * @property {(cid: string) => void} reload
 * @property {(message: string) => void} joinFailed
 */

export class TaskFeed {
  /** parts: {request(event, payload) -> ack (errors as acks), openCid() -> the open conversation's id,
   * deliver(name, payload): an event to apply (held ones come back through it), runningChanged(cid),
   * reload(cid): open the conversation again, joinFailed(message)}.
   * @param {FeedParts} parts */
  constructor(parts) {
    this.request = parts.request;
    this.openCid = parts.openCid;
    this.deliver = parts.deliver;
    this.runningChanged = parts.runningChanged;
    this.reload = parts.reload;
    this.joinFailed = parts.joinFailed;
    /** @type {Map<string, number>} */
    this.seqs = new Map();
    /** @type {Set<string>} */
    this.running = new Set();
    /** @type {{cid: string, buffer: CoreEventArgs[]} | null} */
    this.joining = null;
    /** @type {CoreEventArgs[] | null} */
    this.pendingNew = null;
    this.doneCount = 0;
  }

  isRunning(cid) {
    return this.running.has(cid);
  }

  /** Whether an event of conversation cid is to be applied now: not when held (a join or a new
   * conversation's send awaits its ack) or already seen. Keeps the running set current.
   * @param {string} cid
   * @param {CoreEventArgs} event */
  admit(cid, ...event) {
    const held = this.pendingNew && cid !== this.openCid() ? this.pendingNew : this.joining?.cid === cid ? this.joining.buffer : null;
    if (held) {
      held.push(event);
      return false;
    }
    const [name, payload] = event;
    const seq = Number.isInteger(payload.seq) ? payload.seq : null;
    if (seq !== null) {
      if (seq <= (this.seqs.get(cid) ?? 0)) return false;
      this.seqs.set(cid, seq);
    }
    this.#trackRunning(cid, ...event);
    return true;
  }

  /** @param {string} cid
   * @param {CoreEventArgs} event */
  #trackRunning(cid, ...[name, payload]) {
    const was = this.running.has(cid);
    if (name === "done") {
      this.running.delete(cid);
      this.doneCount += 1;
    } else if (RUNNING_EVENTS.has(name) || (name === "status" && payload.state !== "idle")) this.running.add(cid);
    if (was !== this.running.has(cid)) this.runningChanged(cid);
  }

  /** Say whether cid runs; runningChanged is told when that changes, unless quiet. */
  setRunning(cid, running, { quiet = false } = {}) {
    if (running === this.running.has(cid)) return;
    if (running) this.running.add(cid);
    else this.running.delete(cid);
    if (!quiet) this.runningChanged(cid);
  }

  /** A deleted conversation is followed no more. */
  forget(cid) {
    this.running.delete(cid);
    this.seqs.delete(cid);
  }

  /** A message is being sent: one starting a new conversation holds the events of the conversations
   * not open (its own among them: its id comes with the ack) until `sent`. Returns what `sent` needs. */
  sending(isNew) {
    if (isNew) this.pendingNew = [];
    return this.doneCount;
  }

  /** The send's ack came: the events held meanwhile (for `deliver`), and whether a task finished since
   * `sending` (its `done` may beat the ack). */
  sent(isNew, doneBefore) {
    const held = this.pendingNew ?? [];
    if (isNew) this.pendingNew = null;
    return { held, doneSince: this.doneCount !== doneBefore };
  }

  /** Drop the join under way, if any: its ack and the events it held are ignored. */
  dropJoin() {
    this.joining = null;
  }

  /** Join cid's room: the server replays every event after afterSeq, then sends the rest live. */
  async join(cid, afterSeq) {
    const joining = { cid, buffer: [] };
    this.joining = joining;
    this.seqs.set(cid, afterSeq);
    const wasRunning = this.running.has(cid);
    const ack = await this.request("join", { conversation_id: cid, after_seq: afterSeq });
    if (this.joining !== joining) return;
    this.joining = null;
    if (ack.ok === false) {
      this.joinFailed(ack.error?.message ?? "join failed");
      return;
    }
    const ended = joining.buffer.some(([name]) => name === "done");
    // The server started over (its seq is behind ours), no longer holds every event after ours,
    // or says the task we were following ended without its `done` reaching us: reload.
    const restarted = ack.last_seq < afterSeq;
    const gap = afterSeq < ack.replays_after;
    if (restarted || gap || (wasRunning && !ack.running && !ended)) {
      this.reload(cid);
      return;
    }
    this.setRunning(cid, ack.running === true || (wasRunning && !ended));
    for (const event of joining.buffer) this.deliver(...event);
  }

  /** Called on every (re)connection after the first: catch up on what was missed. */
  resync() {
    const open = this.openCid();
    // A new socket is in no room: forget the seqs of conversations not re-joined (the server may have restarted).
    for (const cid of [...this.seqs.keys()]) {
      if (cid !== open && !this.running.has(cid)) this.seqs.delete(cid);
    }
    for (const cid of this.running) {
      if (cid !== open) this.#rejoinInBackground(cid);
    }
    if (!open) return;
    const last = this.seqs.get(open) ?? 0;
    if (last === 0) this.reload(open);
    else this.join(open, last);
  }

  /** Catch up on a conversation running out of view; all it shows is the running dot. */
  async #rejoinInBackground(cid) {
    const ours = this.seqs.get(cid) ?? 0;
    const ack = await this.request("join", { conversation_id: cid, after_seq: ours });
    if (ack.running === true && ack.last_seq >= ours && ours >= ack.replays_after) return;
    this.seqs.delete(cid);
    this.setRunning(cid, false);
  }
}
