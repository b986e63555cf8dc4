// @ts-check
// The task events of the conversations this tab follows: each applied once and in seq order, which ones
// run, and joining a conversation's room to replay what was missed (on opening it, on every reconnection,
// and when the server says events may have been lost on their way from another server process).
const RUNNING_EVENTS = new Set(["user_message", "token", "thinking", "tool"]);
const EVENTS_LOST = "events_lost"; // a `notice` code: docs/protocol.md §13
const REPLAY_WAIT_MS = 10_000; // for the rest of a replay whose ack came first

/** @typedef {import("./events.js").CoreEventArgs} CoreEventArgs */
/**
 * @typedef {object} FeedParts
 * @property {import("./requests.js").Request} request errors come back as acks
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
    this.parts = parts;
    /** @type {Map<string, number>} */
    this.seqs = new Map();
    /** @type {Set<string>} */
    this.running = new Set();
    /** @type {Joining | null} */
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
    if (event[0] === "notice" && event[1].code === EVENTS_LOST) {
      this.catchUp(cid);
      return false;
    }
    if (this.pendingNew && cid !== this.parts.openCid()) {
      this.pendingNew.push(event);
      return false;
    }
    if (this.joining?.cid === cid) {
      this.joining.hold(event);
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
    if (was !== this.running.has(cid)) this.parts.runningChanged(cid);
  }

  /** Say whether cid runs; runningChanged is told when that changes, unless quiet. */
  setRunning(cid, running, { quiet = false } = {}) {
    if (running === this.running.has(cid)) return;
    if (running) this.running.add(cid);
    else this.running.delete(cid);
    if (!quiet) this.parts.runningChanged(cid);
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
    const joining = new Joining(cid, afterSeq);
    this.joining = joining;
    this.seqs.set(cid, afterSeq);
    const wasRunning = this.running.has(cid);
    const ack = await this.parts.request("join", { conversation_id: cid, after_seq: afterSeq });
    if (this.joining !== joining) return;
    if (ack.ok === false) {
      this.joining = null;
      this.parts.joinFailed(ack.error?.message ?? "join failed");
      return;
    }
    // The server started over (its seq is behind ours) or no longer holds every event after ours;
    // else a replay from another server process may still be on its way (docs/protocol.md §4).
    const whole = ack.last_seq >= afterSeq && afterSeq >= ack.replays_after && (await joining.replayed(ack.last_seq));
    if (this.joining !== joining) return;
    this.joining = null;
    const ended = joining.buffer.some(([name]) => name === "done");
    // ...or says the task we were following ended without its `done` reaching us: reload.
    if (!whole || (wasRunning && !ack.running && !ended)) {
      this.parts.reload(cid);
      return;
    }
    this.setRunning(cid, ack.running === true || (wasRunning && !ended));
    for (const event of joining.ordered()) this.parts.deliver(...event);
  }

  /** Called on every (re)connection after the first: catch up on what was missed. */
  resync() {
    const open = this.parts.openCid();
    // A new socket is in no room: forget the seqs of conversations not re-joined (the server may have restarted).
    for (const cid of [...this.seqs.keys()]) {
      if (cid !== open && !this.running.has(cid)) this.seqs.delete(cid);
    }
    for (const cid of this.running) {
      if (cid !== open) this.#rejoinInBackground(cid);
    }
    if (open) this.catchUp(open);
  }

  /** Join cid again after the last event applied: the open conversation, or one running out of view. */
  catchUp(cid) {
    if (cid === this.parts.openCid()) {
      const last = this.seqs.get(cid) ?? 0;
      if (last === 0) this.parts.reload(cid);
      else this.join(cid, last);
    } else if (this.running.has(cid)) this.#rejoinInBackground(cid);
  }

  /** Catch up on a conversation running out of view; all it shows is the running dot. */
  async #rejoinInBackground(cid) {
    const ours = this.seqs.get(cid) ?? 0;
    const ack = await this.parts.request("join", { conversation_id: cid, after_seq: ours });
    if (ack.error?.code === "disconnected") return; // the next connection rejoins it
    if (ack.running === true && ack.last_seq >= ours && ours >= ack.replays_after) return;
    this.seqs.delete(cid);
    this.setRunning(cid, false);
  }
}

/** A join under way: the events of its conversation, held until its ack has come and the replay is whole
 * (from another server process, the replayed events may come after the ack, or among live ones). */
class Joining {
  /** @param {string} cid
   * @param {number} afterSeq */
  constructor(cid, afterSeq) {
    this.cid = cid;
    this.afterSeq = afterSeq;
    /** @type {CoreEventArgs[]} */
    this.buffer = [];
    /** @type {Set<number>} */
    this.seqs = new Set();
    /** @type {number | null} */
    this.lastSeq = null;
    this.replayedCount = 0; // of the seqs after afterSeq up to lastSeq, those held
    /** @type {(() => void) | null} */
    this.onWhole = null;
  }

  /** @param {CoreEventArgs} event */
  hold(event) {
    this.buffer.push(event);
    const seq = event[1].seq;
    if (!Number.isInteger(seq) || seq <= this.afterSeq || this.seqs.has(seq)) return;
    this.seqs.add(seq);
    if (this.lastSeq !== null && seq <= this.lastSeq) this.replayedCount += 1;
    if (this.onWhole && this.#whole()) this.onWhole();
  }

  /** Resolves true once every seq after afterSeq up to lastSeq is held, false if that takes too long.
   * @param {number} lastSeq */
  replayed(lastSeq) {
    this.lastSeq = lastSeq;
    this.replayedCount = [...this.seqs].filter((seq) => seq <= lastSeq).length;
    if (this.#whole()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), REPLAY_WAIT_MS);
      this.onWhole = () => {
        this.onWhole = null;
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  #whole() {
    return this.lastSeq !== null && this.replayedCount >= this.lastSeq - this.afterSeq;
  }

  /** The held events in seq order (any without a seq first). */
  ordered() {
    return this.buffer.sort(([, a], [, b]) => (a.seq ?? 0) - (b.seq ?? 0));
  }
}
