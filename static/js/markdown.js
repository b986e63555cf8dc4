// @ts-check
// Markdown shown in a container, one element per top-level block (mdblocks.js makes them), incremental so that
// streaming stays smooth: only the blocks that changed are rendered again, a long text in slices of frames.
import { copyText } from "./dom.js";
import { renderBlock, PLAIN } from "./mdblocks.js";
import { lexAside, lexText, streamLexer } from "./mdlex.js";

/** @typedef {import("./mdlex.js").MdToken} MdToken */
/** @typedef {import("./mdlex.js").LinkDef} LinkDef */
/** @typedef {import("./mdblocks.js").Block} Block */

// show() renders a text up to this long at once; a longer one is lexed by a worker and rendered
// in slices, SLICE_BUDGET_MS of each animation frame at most, shared by all views doing so.
const SYNC_CHARS = 4_000;
const SLICE_BUDGET_MS = 6;

// Line ends as marked sees them, so that token lengths add up to offsets in the text.
const normalise = (/** @type {string} */ text) => (text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);
const rawLength = (/** @type {MdToken[]} */ tokens) => tokens.reduce((sum, token) => sum + token.raw.length, 0);

const visible = (/** @type {MdToken} */ token) => token.type !== "space" && token.type !== "def";

/** @type {WeakMap<MdToken, string>} token -> its JSON, for the tokens of a worker (which made it) */
const keys = new WeakMap();
const keyOf = (/** @type {MdToken} */ token) => keys.get(token) ?? JSON.stringify(token);

/** @typedef {(deadline: number) => boolean} SliceStep renders until the deadline; whether some is left */
/** @type {Array<{step: SliceStep, done: () => void}>} the views rendering in slices, in turn */
const slices = [];
let sliceFrame = 0;

/** Calls step(deadline) in animation frames until it returns false (it has nothing left to do).
 * @param {SliceStep} step
 * @returns {Promise<void>} */
function inSlices(step) {
  return new Promise((done) => {
    slices.push({ step, done });
    sliceFrame ||= requestAnimationFrame(runSlices);
  });
}

function runSlices() {
  const deadline = performance.now() + SLICE_BUDGET_MS;
  try {
    while (slices.length && performance.now() < deadline) {
      let more = false;
      try {
        more = slices[0].step(deadline);
      } finally {
        if (!more) slices.shift().done(); // done, or failed: the others go on
      }
    }
  } finally {
    sliceFrame = slices.length ? requestAnimationFrame(runSlices) : 0;
  }
}

/**
 * Renders Markdown into a container, one element per top-level block.
 *
 * set(text) shows a whole text at once; show(text) too, without a long task when the text is long
 * (it resolves once all is shown). stream(text, budget) shows a text that grew since the
 * last call: it lexes only from the open (last) block on; the blocks before it are closed,
 * rendered once and kept. It spends about `budget` ms, rendering closed blocks in order and the
 * open one when none is left, and returns true while some are left (call it again next frame).
 * The open block shows its code unhighlighted, and a list or table in it is rendered part by
 * part (see render and PARTS).
 *
 * Marked decides where a block ends by looking at what follows, so in rare cases (a table whose
 * delimiter row turns out malformed) a closed block is not what lexing the whole text makes;
 * set() or show() on the complete text then makes the elements exactly those of a one-shot
 * render. A block is rendered again only when its token differs: the render of a token depends
 * on nothing else (reference links are resolved while lexing).
 */
export class MarkdownView {
  /** @param {HTMLElement} container */
  constructor(container) {
    this.el = container;
    /** @type {Block[]} the blocks shown, in order */
    this.shown = [];
    this.rendered = 0; // shown blocks of closed tokens; the rest show the open part
    /** @type {MdToken[]} closed tokens not rendered yet */
    this.queue = [];
    /** @type {MdToken[]} the blocks from the open one on */
    this.openTokens = [];
    this.source = ""; // the text, line ends normalised as marked does
    this.closedEnd = 0; // where the open block starts in source
    /** @type {Record<string, LinkDef>} the reference definitions of the text shown */
    this.links = Object.create(null);
    /** @type {Record<string, LinkDef>} those before the open block */
    this.closedLinks = Object.create(null);
    this.generation = 0; // counts the calls of set, stream and show: a pending show() gives up
    this.el.classList.add("markdown");
    this.el.addEventListener("click", (event) => this.#onClick(event));
  }

  /** @param {string} text */
  set(text) {
    this.generation += 1;
    const source = normalise(text);
    const tokens = lexText(source);
    this.#adopt(source, tokens, tokens.links);
    this.#draw(Infinity);
  }

  /** @param {string} text */
  async show(text) {
    if (text.length <= SYNC_CHARS) return void this.set(text);
    this.generation += 1;
    const run = this.generation;
    const source = normalise(text);
    const lexed = await lexAside(source);
    if (run !== this.generation) return;
    lexed.tokens.forEach((token, index) => keys.set(token, lexed.keys[index]));
    this.#adopt(source, lexed.tokens, lexed.links);
    let placed = false; // a container taken out of the page (another conversation shown) stops
    await inSlices((deadline) => {
      if (this.el.isConnected) placed = true;
      else if (placed) return false;
      return run === this.generation && this.#draw(deadline);
    });
  }

  /** @param {string} text
   * @param {number} [budget] ms
   * @returns {boolean | undefined} whether some blocks are left to render */
  stream(text, budget = Infinity) {
    this.generation += 1;
    const deadline = performance.now() + budget;
    const source = normalise(text);
    if (!source.startsWith(this.source.slice(0, this.closedEnd))) return void this.set(text);
    const { links, lex } = streamLexer();
    Object.assign(links, this.closedLinks);
    const tokens = lex(source.slice(this.closedEnd));
    // A new (or growing) reference definition can change any block before it; so could a lexer
    // gone astray.
    const linksChanged = JSON.stringify(links) !== JSON.stringify(this.links);
    if (linksChanged || this.closedEnd + rawLength(tokens) !== source.length) return void this.set(text);
    this.source = source;
    this.links = { ...links };
    this.#split(tokens, this.closedEnd);
    return this.#draw(deadline, true);
  }

  /** Takes the tokens of a whole text: all to be shown again (or kept where they are the same).
   * @param {string} source
   * @param {MdToken[]} tokens
   * @param {Record<string, LinkDef>} links the reference definitions of the text */
  #adopt(source, tokens, links) {
    this.source = source;
    this.links = { ...links };
    this.closedLinks = Object.create(null);
    this.rendered = 0;
    this.queue = [];
    this.closedEnd = 0;
    this.#split(tokens, 0);
  }

  /** Queues the closed tokens of source[start:] and keeps the open ones; moves closedEnd.
   * @param {MdToken[]} tokens
   * @param {number} start */
  #split(tokens, start) {
    const last = tokens.findLastIndex((token) => token.type !== "space");
    let at = start;
    this.openTokens = [];
    tokens.forEach((token, index) => {
      if (index === last) this.closedEnd = at;
      at += token.raw.length;
      if (visible(token)) (index < last ? this.queue : this.openTokens).push(token);
      else if (token.type === "def" && index < last) {
        this.closedLinks[token.tag] ??= { href: token.href, title: token.title };
      }
    });
  }

  /** Renders queued blocks (one at least) until the deadline, then the open ones if none is left;
   * whether some are left.
   * @param {number} deadline
   * @param {boolean} [live] the open blocks are being streamed */
  #draw(deadline, live = false) {
    const stale = this.shown.splice(this.rendered);
    while (this.queue.length) {
      this.#place(this.queue.shift(), stale, false, deadline);
      this.rendered += 1;
      if (performance.now() >= deadline) break;
    }
    let complete = true;
    if (this.queue.length) this.shown.push(...stale.splice(0)); // the old open part stays until its turn
    else for (const token of this.openTokens) complete = this.#place(token, stale, live, deadline) && complete;
    for (const block of stale) block.node.remove();
    return this.queue.length > 0 || !complete;
  }

  /** Shows a token in place of the first stale block (kept when it shows the same token, and
   * for a `live` one also when it shows it with plain code); false when it shows only part of it.
   * @param {MdToken} token
   * @param {Block[]} stale the blocks shown from here on, to be replaced
   * @param {boolean} live
   * @param {number} deadline */
  #place(token, stale, live, deadline) {
    const key = keyOf(token);
    const old = stale.shift();
    if (old?.key === key || (live && old?.key === PLAIN + key)) {
      this.shown.push(old);
      return true;
    }
    const block = renderBlock(token, key, old, live, deadline);
    if (!old) this.el.append(block.node);
    else if (old.node !== block.node) old.node.replaceWith(block.node);
    this.shown.push(block);
    return block.complete ?? true;
  }

  /** A code block's Copy button (mdblocks.js puts one on each).
   * @param {MouseEvent} event */
  async #onClick(event) {
    const button = event.target instanceof Element ? event.target.closest(".copy-code") : null;
    if (!button) return;
    const code = button.closest("pre")?.querySelector("code")?.textContent ?? "";
    if (await copyText(code)) {
      button.classList.add("copied");
      setTimeout(() => button.classList.remove("copied"), 1200);
    }
  }
}
