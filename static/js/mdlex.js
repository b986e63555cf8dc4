// @ts-check
// Lexing Markdown as markdown.js renders it: a whole text (lexText), a streamed one (streamLexer); lexAside()
// has whole long texts lexed off the page's main thread, by this same module run as a worker.
import { Lexer, Marked } from "../vendor/marked/marked.esm.js";

export const LEXER_OPTIONS = { gfm: true };

// marked is vendored as plain JavaScript: what its lexer gives, as this page uses it.
/** A top-level token: its type, its raw text, and the fields of its type (marked's `Token`).
 * @typedef {{type: string, raw: string} & Record<string, any>} MdToken */
/** A reference definition, `[tag]: href "title"`.
 * @typedef {{href: string, title?: string | null}} LinkDef */
/** The tokens of a text and the reference definitions it holds, by tag (marked's `TokensList`).
 * @typedef {MdToken[] & {links: Record<string, LinkDef>}} TokenList */
/** What lexWhole gives: the tokens, each one's key, the links.
 * @typedef {{tokens: MdToken[], keys: string[], links: Record<string, LinkDef>}} Lexed */

const marked = new Marked(LEXER_OPTIONS);

/** A text's top-level tokens, each one's key (its JSON: a block is rendered again only when its
 * key changes) and the reference links it defines.
 * @param {string} source
 * @returns {Lexed} */
export function lexWhole(source) {
  const tokens = lexText(source);
  return { tokens, keys: tokens.map((token) => JSON.stringify(token)), links: { ...tokens.links } };
}

/** A text's tokens, lexed here.
 * @param {string} source
 * @returns {TokenList} */
export function lexText(source) {
  return /** @type {TokenList} */ (marked.lexer(source));
}

/** A lexer for one streamed text: lex(source) gives its tokens; links are the reference definitions it uses,
 * which may be given before it lexes (those of the blocks already closed), and which it adds to.
 * @returns {{links: Record<string, LinkDef>, lex: (source: string) => MdToken[]}} */
export function streamLexer() {
  const lexer = new Lexer(marked.defaults);
  return { links: /** @type {TokenList} */ (lexer.tokens).links, lex: (source) => lexer.lex(source) };
}

let lexer = null; // the worker lexing long texts; false where none can run
const lexing = new Map(); // request id -> { source, resolve }
let lastRequest = 0;

const lexHere = (source) => new Promise((resolve) => resolve(lexWhole(source)));

/** lexWhole(source), from the worker (or this thread when no worker can run). */
export function lexAside(source) {
  lexer ??= startLexer();
  if (!lexer) return lexHere(source);
  lastRequest += 1;
  const id = lastRequest;
  return new Promise((resolve) => {
    lexing.set(id, { source, resolve });
    lexer.postMessage({ id, source });
  });
}

function startLexer() {
  try {
    const worker = new Worker(new URL("./mdlex.js", import.meta.url), { type: "module" });
    worker.onmessage = ({ data }) => {
      lexing.get(data.id)?.resolve(data);
      lexing.delete(data.id);
    };
    worker.onerror = () => { // it did not load, or failed: lex on this thread from now on
      lexer = false;
      worker.terminate();
      for (const { source, resolve } of lexing.values()) resolve(lexHere(source));
      lexing.clear();
    };
    return worker;
  } catch {
    return false;
  }
}

// The page's types know no worker (lib "DOM"): the scope is looked up by name.
const workerScope = /** @type {{WorkerGlobalScope?: Function}} */ (globalThis).WorkerGlobalScope;
if (workerScope && globalThis instanceof workerScope) {
  globalThis.onmessage = ({ data }) => globalThis.postMessage({ id: data.id, ...lexWhole(data.source) });
}
