// @ts-check
// Unified diffs: coloured inline view, side-by-side view, and a box that switches between them.
import { h } from "./dom.js";

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/** True when text looks like a unified diff. */
export function isDiff(text) {
  return /^@@ .* @@/m.test(text) && /^(---|\+\+\+) /m.test(text);
}

function kindOf(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  if (line.startsWith("\\")) return "note";
  return "ctx";
}

function linesOf(text) {
  const lines = String(text).split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

/** A unified diff with added, removed, hunk and header lines coloured. */
export function renderDiff(text) {
  const pre = h("pre", { class: "diff" });
  for (const line of linesOf(text)) {
    const kind = kindOf(line);
    pre.append(h("span", { class: `diff-line diff-${kind === "note" ? "meta" : kind}` }, `${line}\n`));
  }
  return pre;
}

/** Rows of a side-by-side view: removed and added runs are paired line by line. */
export function splitRows(text) {
  const rows = [];
  let oldNo = 0;
  let newNo = 0;
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i += 1) {
      rows.push({ kind: "change", left: dels[i] ?? null, right: adds[i] ?? null });
    }
    dels = [];
    adds = [];
  };
  for (const line of linesOf(text)) {
    const kind = kindOf(line);
    if (kind === "del") dels.push({ no: oldNo++, text: line.slice(1) });
    else if (kind === "add") adds.push({ no: newNo++, text: line.slice(1) });
    else {
      flush();
      const match = kind === "hunk" ? HUNK.exec(line) : null;
      if (match) [oldNo, newNo] = [Number(match[1]), Number(match[2])];
      if (kind === "ctx") {
        rows.push({ kind, left: { no: oldNo++, text: line.slice(1) }, right: { no: newNo++, text: line.slice(1) } });
      } else if (kind === "hunk") rows.push({ kind, text: line });
    }
  }
  flush();
  return rows;
}

function half(side, kind, where) {
  if (!side) return [h("span", { class: "split-no empty" }), h("span", { class: `split-text ${where} empty` })];
  const cls = kind === "ctx" ? "" : ` diff-${kind}`;
  return [h("span", { class: `split-no${cls}`, text: side.no }), h("span", { class: `split-text ${where}${cls}`, text: side.text })];
}

/** The same diff as two columns, before and after. */
export function renderSplitDiff(text) {
  const grid = h("div", { class: "diff-split", role: "table", "aria-label": "Side-by-side diff" });
  for (const row of splitRows(text)) {
    if (row.kind === "hunk") grid.append(h("span", { class: "split-hunk diff-hunk", text: row.text }));
    else {
      const change = row.kind !== "ctx";
      grid.append(...half(row.left, change ? "del" : "ctx", "left"), ...half(row.right, change ? "add" : "ctx", "right"));
    }
  }
  return grid;
}

/** A diff with an "Inline / Side by side" switch. */
export class DiffView {
  constructor(text) {
    this.text = String(text ?? "");
    this.body = h("div", { class: "diff-body" });
    this.toggle = h("button", { type: "button", class: "btn-ghost diff-toggle", "data-testid": "diff-toggle", onclick: () => this.setSplit(!this.split) });
    this.el = h("div", { class: "diff-view" }, this.body);
    this.setSplit(false);
  }

  setSplit(split) {
    this.split = split;
    this.body.replaceChildren(split ? renderSplitDiff(this.text) : renderDiff(this.text));
    this.toggle.textContent = split ? "Inline" : "Side by side";
    this.toggle.setAttribute("aria-pressed", String(split));
  }
}
