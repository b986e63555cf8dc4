// @ts-check
// Debug page: tails the model stream log and the agent log, polling once a second. A line opens to show
// its whole record with JSON held in strings laid out; a conversation is picked from a list; a trace id
// follows one task: its agent records, and the model stream of its conversation while it ran.
import { h } from "./dom.js";

const POLL_MS = 1000;
const MAX_LINES = 5000;
const TRACE_SHOWN = 8;
const token = document.body.dataset.token ?? "";
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const $ = (selector) => document.querySelector(selector);

const panes = [
  { name: "debug", url: "/api/logs/debug_stream", el: $("#pane-debug"), offset: null, count: 0, lines: [], unit: ["delta", "deltas"] },
  { name: "agent", url: "/api/logs/agent", el: $("#pane-agent"), offset: null, count: 0, lines: [], unit: ["record", "records"] },
];
const [streamPane] = panes;
const filter = $("#conversation-filter");
const traceChip = $("#trace-chip");
const pauseButton = $("#pause-button");
const autoscroll = $("#autoscroll");
const status = $("#poll-status");
let paused = false;
let generation = 0;
let demo = false; // the demo model answers: it sends nothing over the network, so the model stream stays empty
const conversationTitles = new Map();
// The task followed: its trace id, its conversation, and when it started and ended (from its records).
let trace = null;

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The value with every string that holds a JSON object or array replaced by what it holds. */
function unfold(value) {
  if (typeof value === "string") {
    const inner = /^\s*[[{]/.test(value) ? parse(value) : undefined;
    return inner !== undefined && typeof inner === "object" ? unfold(inner) : value;
  }
  if (Array.isArray(value)) return value.map(unfold);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unfold(v)]));
  return value;
}

function levelOf(record) {
  return String(record.level ?? record.levelname ?? "").toLowerCase();
}

function timeOf(record) {
  const when = record.time ?? record.ts ?? record.timestamp;
  if (when !== undefined) return Date.parse(when) / 1000;
  return typeof record.t === "number" ? record.t : NaN;
}

/** A line that opens (click, Enter) to its whole record, laid out. */
function line(text, record, parts) {
  const el = h("div", { class: `line${record ? ` level-${levelOf(record)}` : ""}`, tabindex: record ? "0" : null }, parts);
  if (!record) return el;
  const toggle = (event) => {
    if (event.target.closest("button")) return;
    const open = el.querySelector(".detail");
    if (open) open.remove();
    else el.append(h("pre", { class: "detail", "data-testid": "line-detail" }, JSON.stringify(unfold(record), null, 2)));
  };
  el.addEventListener("click", toggle);
  el.addEventListener("keydown", (event) => { if (event.key === "Enter") toggle(event); });
  return el;
}

function traceButton(record) {
  const id = String(record.trace_id);
  return h("button", {
    type: "button", class: "trace-link", "data-testid": "trace-link", "data-trace": id, title: `Follow this task: trace ${id}`,
    onclick: () => follow({ id, conversation: record.conversation_id ?? null }),
  }, id.slice(0, TRACE_SHOWN));
}

/** One agent.jsonl line: time, level, logger, message, its trace, then the remaining fields. */
function agentLine(text) {
  const record = parse(text);
  if (!record || typeof record !== "object") return line(text, null, [text]);
  const { ts, time, timestamp, level, levelname, logger, name, module, msg, message, trace_id: traceId, ...rest } = record;
  const when = String(ts ?? time ?? timestamp ?? "").replace(/^\d{4}-\d\d-\d\dT/, "").replace(/(\.\d{3})\d*/, "$1").replace(/([+-]\d\d:?\d\d|Z)$/, "");
  const extra = Object.keys(rest).length ? JSON.stringify(rest) : "";
  return line(text, record, [
    when ? h("span", { class: "ts", text: when }) : null,
    level ?? levelname ? h("span", { class: "lvl", text: String(level ?? levelname) }) : null,
    logger ?? name ?? module ? h("span", { class: "lg", text: String(logger ?? name ?? module) }) : null,
    h("span", { class: "msg", text: String(msg ?? message ?? "") }),
    traceId ? traceButton(record) : null,
    extra ? h("span", { class: "fields", text: extra }) : null,
  ]);
}

function streamLine(text) {
  const record = parse(text);
  return line(text, record && typeof record === "object" ? record : null, [text]);
}

/** Whether a model stream line falls inside the followed task (its conversation, while it ran). */
function inTrace(text) {
  if (!trace) return true;
  if (!Number.isFinite(trace.start)) return false;
  const t = parse(text)?.t;
  return typeof t === "number" && t >= trace.start && t <= trace.end;
}

/** What the agent pane's records of the followed task say about when it ran. */
function learnWindow(lines) {
  if (!trace) return false;
  const before = `${trace.start}-${trace.end}`;
  for (const text of lines) {
    const record = parse(text);
    if (!record || record.trace_id !== trace.id) continue;
    const at = timeOf(record);
    if (Number.isFinite(at) && !(at >= trace.start)) trace.start = at;
    if (record.message === "task ended" && Number.isFinite(at)) trace.end = at;
    if (record.message === "task started" && record.prompt) trace.prompt = promptText(record.prompt);
    trace.conversation ??= record.conversation_id ?? null;
  }
  labelTrace();
  return `${trace.start}-${trace.end}` !== before;
}

/** A prompt as logged: its text, or with AGENT_LOG_REDACT_CONTENT its first characters. */
function promptText(prompt) {
  const text = typeof prompt === "string" ? prompt : String(prompt?.head ?? "");
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

/** The trace chip names the task by its message and its conversation's title; the id stays in the tooltip. */
function labelTrace() {
  if (!trace) return;
  const title = trace.conversation ? conversationTitles.get(trace.conversation) : null;
  const parts = [trace.prompt ? `“${trace.prompt}”` : "a task", title ? `in ${title}` : null].filter(Boolean);
  traceChip.querySelector("[data-role=label]").textContent = parts.join(" ");
  traceChip.title = `Only the records of this task (trace ${trace.id}), and the model stream while it ran`;
}

function render(pane, lines) {
  const fragment = document.createDocumentFragment();
  for (const text of lines) fragment.append(pane.name === "agent" ? agentLine(text) : streamLine(text));
  pane.el.append(fragment);
  while (pane.el.childElementCount > MAX_LINES) pane.el.firstElementChild.remove();
}

function setCount(pane) {
  const [one, many] = pane.unit;
  document.querySelector(`[data-count="${pane.name}"]`).textContent = `${pane.count.toLocaleString()} ${pane.count === 1 ? one : many}`;
  if (pane === streamPane) explainEmptyStream();
}

/** Why the model stream shows nothing: what it would hold, and what keeps it empty now. */
function explainEmptyStream() {
  const note = $("#stream-empty");
  note.hidden = streamPane.count > 0;
  if (note.hidden) return;
  const title = (cid) => conversationTitles.get(cid) ?? "this conversation";
  let why;
  if (demo) why = "The demo model answers here: it is a script in this process and streams nothing over the network, so there are no deltas to show.";
  else if (trace && !Number.isFinite(trace.start)) why = "Waiting for the followed task's records in the agent log, to know when it ran.";
  else if (trace) why = "The model sent no deltas while the followed task ran (between its “task started” and “task ended” records).";
  else if (filter.value) why = `No model call of “${title(filter.value)}” in the log's tail yet.`;
  else why = "No model call in the log's tail yet: send a message and its deltas appear here as they arrive.";
  note.replaceChildren(
    h("strong", {}, "No model deltas. "),
    "This pane shows each raw delta the model API streams back (one SSE data: payload a line, logs/debug_stream.log). ",
    why,
  );
}

function append(pane, lines) {
  if (!lines.length) return;
  const stick = pane.el.scrollHeight - pane.el.scrollTop - pane.el.clientHeight < 40;
  pane.lines.push(...lines);
  if (pane.lines.length > MAX_LINES) pane.lines.splice(0, pane.lines.length - MAX_LINES);
  const shown = pane === streamPane ? lines.filter(inTrace) : lines;
  render(pane, shown);
  pane.count += shown.length;
  setCount(pane);
  if (autoscroll.checked && stick) pane.el.scrollTop = pane.el.scrollHeight;
}

/** The followed task's window changed: show the stream lines that fall in it now. */
function refilterStream() {
  streamPane.el.replaceChildren();
  const shown = streamPane.lines.filter(inTrace);
  render(streamPane, shown);
  streamPane.count = shown.length;
  setCount(streamPane);
}

async function fetchJson(url) {
  const response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store" });
  if (!response.ok) throw new Error(`${url.split("?")[0]}: HTTP ${response.status}`);
  const data = await response.json();
  if (data.ok === false) throw new Error(data.error?.message ?? `${url} failed`);
  return data;
}

async function pollPane(pane, current) {
  // The first request names no offset: the server answers with the tail of the log.
  const params = new URLSearchParams(pane.offset === null ? {} : { after: String(pane.offset) });
  const conversation = trace?.conversation ?? filter.value;
  if (conversation) params.set("conversation_id", conversation);
  if (trace && pane.name === "agent") params.set("trace_id", trace.id);
  const data = await fetchJson(`${pane.url}?${params}`);
  if (current !== generation) return [];
  if (Number.isInteger(data.next)) pane.offset = data.next;
  return Array.isArray(data.lines) ? data.lines : [];
}

async function poll() {
  if (!paused) {
    const current = generation;
    const results = await Promise.allSettled(panes.map((pane) => pollPane(pane, current)));
    if (current === generation) {
      const [stream, agent] = results.map((r) => (r.status === "fulfilled" ? r.value : []));
      append(panes[1], agent);
      if (learnWindow(agent)) refilterStream();
      append(streamPane, stream);
    }
    const failed = results.find((r) => r.status === "rejected");
    status.dataset.state = failed ? "error" : "ok";
    status.textContent = failed ? String(failed.reason?.message ?? failed.reason) : `Updated ${new Date().toLocaleTimeString()}`;
  }
  setTimeout(poll, POLL_MS);
}

function restart() {
  generation += 1;
  for (const pane of panes) {
    pane.offset = null;
    pane.count = 0;
    pane.lines = [];
    pane.el.replaceChildren();
    setCount(pane);
  }
  const url = new URL(window.location.href);
  url.searchParams.delete("token");
  for (const [key, value] of [["conversation_id", trace?.conversation ?? filter.value], ["trace_id", trace?.id]]) {
    if (value) url.searchParams.set(key, value);
    else url.searchParams.delete(key);
  }
  window.history.replaceState(null, "", url);
}

function follow(next) {
  trace = next ? { start: NaN, end: Infinity, ...next } : null;
  traceChip.hidden = !trace;
  if (trace) {
    labelTrace();
    if (trace.conversation) pick(trace.conversation);
  }
  filter.disabled = Boolean(trace);
  restart();
}

/** Select a conversation in the list, adding it when the list does not have it (yet). */
function pick(cid) {
  if (![...filter.options].some((option) => option.value === cid)) {
    filter.append(h("option", { value: cid }, `${cid.slice(0, 12)}…`));
  }
  filter.value = cid;
}

async function loadConversations() {
  const data = await fetchJson("/api/conversations").catch(() => null);
  if (!data) return;
  const chosen = filter.value;
  for (const c of data.conversations ?? []) conversationTitles.set(c.id, c.title || "(untitled)");
  labelTrace();
  explainEmptyStream();
  const options = (data.conversations ?? []).map((c) => {
    const when = String(c.updated_at ?? "").slice(0, 16).replace("T", " ");
    return h("option", { value: c.id, title: c.id }, `${c.title || "(untitled)"} · ${when}`);
  });
  filter.replaceChildren(h("option", { value: "" }, "All conversations"), ...options);
  if (chosen) pick(chosen);
}

const query = new URLSearchParams(window.location.search);
if (query.get("conversation_id")) pick(query.get("conversation_id"));
filter.addEventListener("change", restart);
filter.addEventListener("focus", loadConversations);
traceChip.querySelector("[data-role=clear]").addEventListener("click", () => follow(null));
pauseButton.addEventListener("click", () => {
  paused = !paused;
  pauseButton.setAttribute("aria-pressed", String(paused));
  pauseButton.textContent = paused ? "Resume" : "Pause";
  status.textContent = paused ? "Paused" : "Resuming…";
});
$("#clear-button").addEventListener("click", () => {
  for (const pane of panes) {
    pane.el.replaceChildren();
    pane.lines = [];
    pane.count = 0;
    setCount(pane);
  }
});
loadConversations();
fetchJson("/api/status").then((status) => {
  demo = Boolean(status.demo);
  explainEmptyStream();
}).catch(() => {});
if (query.get("trace_id")) follow({ id: query.get("trace_id"), conversation: query.get("conversation_id") || null });
else restart();
poll();
