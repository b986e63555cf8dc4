// @ts-check
// One of the person's terminals in the page: an xterm.js screen fitted to its box, fed from the server's
// `terminal` events by byte offset (the scrollback terminal_attach gives, then what comes after it), and sending
// each keystroke as it is typed (terminal_input) and each new size (terminal_resize).
import { FitAddon } from "../vendor/xterm/addon-fit.mjs";
import { Terminal } from "../vendor/xterm/xterm.mjs";
import { styleNonce } from "./dom.js";

/** @typedef {import("@xterm/xterm").Terminal} XTerm */
/** @typedef {import("./events.js").TerminalEvent} TerminalEvent */
/** What a screen's keys go through: `typed` may change a typed key (the key row's Ctrl), `send` takes a frame to the
 * shell, `resize` the screen's new size.
 * @typedef {{typed: (data: string) => string, send: (data: string) => Promise<unknown>,
 *   resize: (rows: number, cols: number) => void}} Wire */

const FRAME_CHARS = 4096; // a paste goes in frames below terminal_input's limit
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const NOT_ASCII = /[^\x00-\x7f]/;

/** How many bytes `text` takes in UTF-8 (without encoding it when it is ASCII, as a flood of output mostly is).
 * @param {string} text */
function utf8Length(text) {
  return NOT_ASCII.test(text) ? encoder.encode(text).length : text.length;
}

let nonceGiven = false;

/** xterm writes its theme and cell sizes into <style> elements it makes; the page's Content-Security-Policy lets in
 * only those that carry this page's style nonce (dom.js styleNonce). Every <style> the document makes from now on carries it (the page's own scripts are the only ones that run). */
function giveStylesTheNonce() {
  if (nonceGiven) return;
  nonceGiven = true;
  const nonce = styleNonce();
  const make = document.createElement.bind(document);
  document.createElement = /** @type {typeof document.createElement} */ ((tag, options) => {
    const element = make(tag, options);
    if (String(tag).toLowerCase() === "style") element.nonce = nonce;
    return element;
  });
}

/** xterm's DOM renderer styles a cell in a 24-bit colour with a `style` attribute, which the page's
 * Content-Security-Policy refuses (an attribute cannot carry the nonce); the same declarations set through the CSSOM
 * are allowed. Relies on an internal of xterm 6.0.0 (pinned in package.json): its DomRendererRowFactory's
 * `_addStyle(element, declarations)`, at `_core._renderService._renderer.value._rowFactory`; a 24-bit colour is
 * tested (tests/test_terminal_browser.py), and a version without it says so in the console.
 * @param {XTerm} term */
function styleCellsThroughCssom(term) {
  const factory = /** @type {any} */ (term)._core?._renderService?._renderer?.value?._rowFactory;
  if (typeof factory?._addStyle !== "function") {
    console.error("xterm's DOM renderer has no _addStyle: 24-bit colours meet the Content-Security-Policy");
    return;
  }
  factory._addStyle = (/** @type {HTMLElement} */ element, /** @type {string} */ declarations) => {
    element.style.cssText += `${declarations};`;
  };
}

export class TerminalView {
  /** @param {HTMLElement} box where the screen goes
   * @param {Wire} wire */
  constructor(box, wire) {
    giveStylesTheNonce();
    this.box = box;
    this.wire = wire;
    /** @type {string | null} */
    this.id = null;
    this.end = 0; // the byte offset after everything written to the screen
    this.ended = false;
    this.typed = ""; // keys not sent yet: one terminal_input at a time, as the server may run concurrent ones in any order
    this.sending = false;
    /** @type {XTerm} the typings of @xterm/xterm (the vendored build carries none) */
    this.term = /** @type {XTerm} */ (/** @type {unknown} */ (new Terminal({
      fontFamily: getComputedStyle(document.body).getPropertyValue("--mono").trim() || "monospace",
      fontSize: 13,
      scrollback: 5000,
      cursorBlink: true,
      theme: { background: "#1e1e1e", foreground: "#e6e6e6" },
    })));
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(box);
    styleCellsThroughCssom(this.term);
    this.term.onData((data) => this.send(wire.typed(data)));
    this.term.onResize(({ rows, cols }) => { if (this.id) this.wire.resize(rows, cols); });
    this.resizes = new ResizeObserver(() => this.refit());
    this.resizes.observe(box);
    this.refit();
  }

  /** The terminal this screen shows is `id`: what was typed meanwhile goes to it.
   * @param {string} id */
  connect(id) {
    this.id = id;
    this.box.dataset.terminal = id;
    this.send("");
  }

  /** The screen's size in cells. */
  get size() {
    return { rows: this.term.rows, cols: this.term.cols };
  }

  /** Fit the screen to its box while it shows (a hidden box has no size to fit). */
  refit() {
    if (this.box.offsetParent !== null) this.fit.fit();
  }

  /** The server's scrollback from terminal_attach: the screen starts again from it.
   * @param {string} data
   * @param {number} offset
   * @param {number} nextOffset */
  restore(data, offset, nextOffset) {
    this.term.reset();
    this.end = offset;
    this.#write(data, offset);
    this.end = nextOffset;
  }

  /** A `terminal` event: what the screen has not shown yet is written.
   * @param {TerminalEvent} event */
  apply(event) {
    if (event.data) this.#write(event.data, event.offset);
    if (event.ended) {
      this.ended = true;
      this.term.write("\r\n\x1b[2m[the shell has ended]\x1b[0m\r\n");
    }
  }

  /** Write `data` (beginning at byte `offset` of the terminal's output) but for the part already written.
   * @param {string} data
   * @param {number} offset */
  #write(data, offset) {
    if (offset >= this.end) {
      this.term.write(data);
      this.end = offset + utf8Length(data);
      return;
    }
    const bytes = encoder.encode(data);
    if (offset + bytes.length <= this.end) return;
    this.term.write(decoder.decode(bytes.subarray(this.end - offset)));
    this.end = offset + bytes.length;
  }

  /** Typed keys (or a paste, in frames) to the shell, in order: what is typed while one frame is on its way goes
   * in the next.
   * @param {string} data */
  async send(data) {
    if (this.ended) return;
    this.typed += data;
    if (this.sending || !this.id) return; // typed before the terminal opened: sent once it has its id
    this.sending = true;
    while (this.typed) {
      const cut = FRAME_CHARS - (/[\ud800-\udbff]/.test(this.typed.charAt(FRAME_CHARS - 1)) ? 1 : 0);
      const frame = this.typed.slice(0, cut); // never half a surrogate pair
      this.typed = this.typed.slice(frame.length);
      await this.wire.send(frame);
    }
    this.sending = false;
  }

  /** The last `count` lines of the screen and its scrollback, without the trailing blank ones.
   * @param {number} count */
  recentText(count) {
    const buffer = this.term.buffer.active;
    const lines = [];
    for (let row = 0; row < buffer.length; row++) lines.push(buffer.getLine(row)?.translateToString(true) ?? "");
    while (lines.length && !lines[lines.length - 1].trim()) lines.pop();
    return lines.slice(-count).join("\n");
  }

  /** The cursor keys as the shell expects them now (application mode or not).
   * @param {"A" | "B" | "C" | "D"} key */
  arrow(key) {
    return `\x1b${this.term.modes.applicationCursorKeysMode ? "O" : "["}${key}`;
  }

  focus() {
    this.term.focus();
  }

  dispose() {
    this.resizes.disconnect();
    this.term.dispose();
    this.box.remove();
  }
}
