// Debug page: tails the model stream log and the agent log, polling once a second.
import { debounce, h } from "./dom.js";

const POLL_MS = 1000;
const MAX_LINES = 5000;
const token = document.body.dataset.token ?? "";
const $ = (selector) => document.querySelector(selector);

const panes = [
  { name: "debug", url: "/api/logs/debug_stream", el: $("#pane-debug"), offset: null, count: 0 },
  { name: "agent", url: "/api/logs/agent", el: $("#pane-agent"), offset: null, count: 0 },
];
const filter = $("#conversation-filter");
const pauseButton = $("#pause-button");
const autoscroll = $("#autoscroll");
const status = $("#poll-status");
let paused = false;
let generation = 0;

function levelOf(record) {
  return String(record.level ?? record.levelname ?? "").toLowerCase();
}

/** One agent.jsonl line: time, level, logger, message, then the remaining fields. */
function agentLine(text) {
  let record;
  try {
    record = JSON.parse(text);
  } catch {
    return h("div", { class: "line" }, text);
  }
  if (!record || typeof record !== "object") return h("div", { class: "line" }, text);
  const { ts, time, timestamp, level, levelname, logger, name, msg, message, ...rest } = record;
  const when = String(ts ?? time ?? timestamp ?? "").replace(/^\d{4}-\d\d-\d\dT/, "").replace(/(\.\d{3})\d*/, "$1").replace(/([+-]\d\d:?\d\d|Z)$/, "");
  const extra = Object.keys(rest).length ? JSON.stringify(rest) : "";
  return h(
    "div",
    { class: `line level-${levelOf(record)}`, title: text },
    when ? h("span", { class: "ts", text: when }) : null,
    level ?? levelname ? h("span", { class: "lvl", text: String(level ?? levelname) }) : null,
    logger ?? name ? h("span", { class: "lg", text: String(logger ?? name) }) : null,
    h("span", { class: "msg", text: String(msg ?? message ?? "") }),
    extra ? h("span", { class: "fields", text: extra }) : null,
  );
}

function append(pane, lines) {
  if (!lines.length) return;
  const stick = pane.el.scrollHeight - pane.el.scrollTop - pane.el.clientHeight < 40;
  const fragment = document.createDocumentFragment();
  for (const line of lines) fragment.append(pane.name === "agent" ? agentLine(line) : h("div", { class: "line" }, line));
  pane.el.append(fragment);
  while (pane.el.childElementCount > MAX_LINES) pane.el.firstElementChild.remove();
  pane.count += lines.length;
  document.querySelector(`[data-count="${pane.name}"]`).textContent = pane.count.toLocaleString();
  if (autoscroll.checked && stick) pane.el.scrollTop = pane.el.scrollHeight;
}

async function pollPane(pane, current) {
  // The first request names no offset: the server answers with the tail of the log.
  const params = new URLSearchParams(pane.offset === null ? {} : { after: String(pane.offset) });
  if (filter.value.trim()) params.set("conversation_id", filter.value.trim());
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const response = await fetch(`${pane.url}?${params}`, { headers, credentials: "same-origin", cache: "no-store" });
  if (!response.ok) throw new Error(`${pane.url}: HTTP ${response.status}`);
  const data = await response.json();
  if (current !== generation) return;
  if (data.ok === false) throw new Error(data.error?.message ?? `${pane.url} failed`);
  if (Number.isInteger(data.next)) pane.offset = data.next;
  append(pane, Array.isArray(data.lines) ? data.lines : []);
}

async function poll() {
  if (!paused) {
    const current = generation;
    const results = await Promise.allSettled(panes.map((pane) => pollPane(pane, current)));
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
    pane.el.replaceChildren();
    document.querySelector(`[data-count="${pane.name}"]`).textContent = "0";
  }
  const url = new URL(window.location.href);
  url.searchParams.delete("token");
  if (filter.value.trim()) url.searchParams.set("conversation_id", filter.value.trim());
  else url.searchParams.delete("conversation_id");
  window.history.replaceState(null, "", url);
}

filter.value = new URLSearchParams(window.location.search).get("conversation_id") ?? "";
filter.addEventListener("input", debounce(restart, 400));
pauseButton.addEventListener("click", () => {
  paused = !paused;
  pauseButton.setAttribute("aria-pressed", String(paused));
  pauseButton.textContent = paused ? "Resume" : "Pause";
  status.textContent = paused ? "Paused" : "Resuming…";
});
$("#clear-button").addEventListener("click", () => {
  for (const pane of panes) {
    pane.el.replaceChildren();
    pane.count = 0;
    document.querySelector(`[data-count="${pane.name}"]`).textContent = "0";
  }
});
restart();
poll();
