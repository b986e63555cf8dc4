// @ts-check
// One background process's output as the processes panel shows it: the tail read once with process_output when
// first shown, then the `process` events' output appended by byte offset; only the last MAX_CHARS are kept.

const MAX_CHARS = 32 * 1024;
const TAIL_BYTES = 16 * 1024; // read when the output is first shown
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `text` without its first `count` bytes (UTF-8).
 * @param {string} text
 * @param {number} count */
function afterBytes(text, count) {
  return count <= 0 ? text : decoder.decode(encoder.encode(text).slice(count));
}

export class ProcessOutput {
  /** `read(offset)` asks the server for the output from a byte offset (process_output's ack).
   * @param {HTMLElement} view
   * @param {(offset: number) => Promise<import("./requests.js").ProcessOutputAck>} read */
  constructor(view, read) {
    this.view = view;
    this.read = read;
    this.text = "";
    this.end = 0; // the byte offset after everything this process wrote that is known here
    this.next = 0; // the byte offset after `text`
    this.loaded = false; // the tail was read: from here on events extend `text`
    /** @type {Array<{offset: number, delta: string}> | null} events held while the tail is read */
    this.held = null;
  }

  /** An `output` event's text, from byte `offset`.
   * @param {number} offset
   * @param {string} delta */
  append(offset, delta) {
    if (this.held) this.held.push({ offset, delta });
    else if (this.loaded) this.#extend(offset, delta);
    this.end = Math.max(this.end, offset + encoder.encode(delta).length);
  }

  /** Where the output ends as list_processes counted it.
   * @param {number | undefined} end */
  knownEnd(end) {
    if (typeof end === "number") this.end = Math.max(this.end, end);
  }

  /** Show it: its tail read once, then kept current by the events. */
  async show() {
    if (this.loaded || this.held) return this.#render();
    this.held = [];
    const ack = await this.read(Math.max(0, this.end - TAIL_BYTES));
    const held = this.held;
    this.held = null;
    if (!ack.ok) {
      this.view.textContent = ack.error?.message ?? "Its output could not be read.";
      return;
    }
    this.loaded = true;
    this.text = (ack.offset ? "…" : "") + (ack.text ?? "");
    this.next = ack.next_offset ?? 0;
    for (const { offset, delta } of held) this.#extend(offset, delta);
    this.#render();
  }

  /** @param {number} offset
   * @param {string} delta */
  #extend(offset, delta) {
    const next = this.next;
    if (offset + encoder.encode(delta).length <= next) return; // already shown
    this.text += offset > next ? `\n[… ${offset - next} bytes not kept …]\n${delta}` : afterBytes(delta, next - offset);
    this.next = offset + encoder.encode(delta).length;
    if (this.text.length > MAX_CHARS) this.text = "…" + this.text.slice(this.text.length - MAX_CHARS);
    if (!this.view.hidden) this.#render();
  }

  #render() {
    const atBottom = this.view.scrollTop + this.view.clientHeight >= this.view.scrollHeight - 4;
    this.view.textContent = this.text || "(no output yet)";
    if (atBottom) this.view.scrollTop = this.view.scrollHeight;
  }
}
