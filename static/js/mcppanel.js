// The sidebar's MCP panel: each configured server (connected / starting / failed with the
// reason / disabled) and its tools, from `get_status`'s `mcp` field.
import { h } from "./dom.js";

const STATE_TEXT = { connected: "connected", starting: "starting…", failed: "failed", disabled: "disabled" };
const POLL_MS = 2000;
const POLLS_MAX = 30;

function policy(tool) {
  if (tool.read_only) return "read-only";
  return tool.asks ? "asks in ask mode" : "always allowed";
}

function renderServer(server) {
  const tools = server.tools.map((tool) =>
    h("li", { class: "mcp-tool", title: tool.description ?? "" },
      h("code", {}, tool.tool), h("span", { class: "mcp-tool-policy" }, policy(tool))));
  const summary = h("summary", { class: "mcp-server-head" },
    h("span", { class: "mcp-dot", "data-state": server.state, "aria-hidden": "true" }),
    h("span", { class: "mcp-name" }, server.name),
    h("span", { class: "mcp-state" }, STATE_TEXT[server.state] ?? server.state),
    server.tools.length ? h("span", { class: "mcp-count" }, `${server.tools.length} tools`) : null);
  return h("li", { class: "mcp-server", "data-testid": "mcp-server", "data-name": server.name, "data-state": server.state },
    h("details", {},
      summary,
      server.error ? h("p", { class: "mcp-error" }, server.error) : null,
      server.target ? h("p", { class: "mcp-target" }, `${server.transport} · ${server.target}`) : null,
      tools.length ? h("ul", { class: "mcp-tools" }, tools) : null));
}

export class McpPanel {
  /** `reload` fetches the status again (the panel polls while a server is starting). */
  constructor(root, { reload }) {
    this.root = root;
    this.list = root.querySelector("[data-role=servers]");
    this.reload = reload;
    this.polls = 0;
    this.timer = null;
  }

  render(mcp) {
    const servers = mcp?.servers ?? [];
    const problems = mcp?.problems ?? [];
    this.root.hidden = servers.length === 0 && problems.length === 0;
    const open = new Set([...this.list.querySelectorAll("details[open]")].map((d) => d.parentElement.dataset.name));
    this.list.replaceChildren(
      ...problems.map((p) => h("li", { class: "mcp-problem" }, `${p.path}: ${p.message}`)),
      ...servers.map(renderServer),
    );
    for (const item of this.list.querySelectorAll(".mcp-server")) {
      if (open.has(item.dataset.name)) item.querySelector("details").open = true;
    }
    this.#pollWhileStarting(servers);
  }

  #pollWhileStarting(servers) {
    clearTimeout(this.timer);
    if (!servers.some((s) => s.state === "starting") || this.polls >= POLLS_MAX) return;
    this.polls += 1;
    this.timer = setTimeout(() => this.reload(), POLL_MS);
  }
}
