// @ts-check
// The sidebar's MCP panel: each configured server (connected / starting / failed with the reason / turned
// off / not started) with its tools, from `get_status`'s `mcp` field; it adds, restarts, turns off or on and
// removes servers (docs/protocol.md §10: only the user's file is changed).
import { choose } from "./dialog.js";
import { h, icon } from "./dom.js";
import { addServerDialog } from "./mcpform.js";

/** @typedef {import("./requests.js").McpServer} McpServer */
/** @typedef {import("./requests.js").McpTool} McpTool */
/** @typedef {import("./requests.js").McpStatus} McpStatus */
/** @typedef {"mcp_restart_server" | "mcp_set_enabled" | "mcp_remove_server"} McpOperation */

const POLL_MS = 2000;
const POLLS_MAX = 30;

/** What a server is in words, and whether that is a problem: a server the user turned off is not one.
 * @param {McpServer} server */
function condition(server) {
  if (server.state !== "disabled") return { kind: server.state, text: server.state === "starting" ? "starting…" : server.state };
  if (server.disabled) return { kind: "off", text: "off" };
  // an entry that did not load has no transport; one that loaded but may not start is the workspace's, untrusted
  return server.transport ? { kind: "untrusted", text: "not started" } : { kind: "invalid", text: "bad entry" };
}

/** @param {McpTool} tool */
function policy(tool) {
  if (tool.read_only) return "read-only";
  return tool.asks ? "asks in ask mode" : "always allowed";
}

export class McpPanel {
  /** `reload` fetches the status again (the panel polls while a server is starting); `request(event, payload)`
   * sends an event and resolves with its ack.
   * @param {HTMLElement} root
   * @param {{ reload: () => void, request: import("./requests.js").Request }} options */
  constructor(root, { reload, request }) {
    this.root = root;
    this.list = /** @type {HTMLElement} */ (root.querySelector("[data-role=servers]"));
    this.reload = reload;
    this.request = request;
    this.polls = 0;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** @type {string | null} */
    this.config = null;
    root.querySelector(".side-heading")?.append(h("button", {
      type: "button", class: "btn-ghost btn-icon mcp-add", "data-testid": "mcp-add", "aria-label": "Add an MCP server",
      title: "Add an MCP server", onclick: () => this.#add(),
    }, icon("plus")));
  }

  /** @param {McpStatus | undefined} mcp */
  render(mcp) {
    const servers = mcp?.servers ?? [];
    const problems = mcp?.problems ?? [];
    this.config = mcp?.config ?? this.config;
    this.root.hidden = false;
    const open = new Set([...this.list.querySelectorAll("details[open]")].map((d) => /** @type {HTMLElement} */ (d.parentElement).dataset.name));
    this.list.replaceChildren(
      ...problems.map((p) => h("li", { class: "mcp-problem" }, `${p.path}: ${p.message}`)),
      ...servers.map((server) => this.#server(server)),
      ...(servers.length || problems.length ? [] : [h("li", { class: "mcp-empty", text: "None yet: + adds one." })]),
    );
    for (const item of this.list.querySelectorAll(".mcp-server")) {
      const details = item.querySelector("details");
      if (details && open.has(/** @type {HTMLElement} */ (item).dataset.name)) details.open = true;
    }
    this.#pollWhileStarting(servers);
  }

  /** @param {McpServer} server */
  #server(server) {
    const { kind, text } = condition(server);
    const tools = server.tools.map((tool) =>
      h("li", { class: "mcp-tool", title: tool.description ?? "" },
        h("code", {}, tool.tool), h("span", { class: "mcp-tool-policy" }, policy(tool))));
    const summary = h("summary", { class: "mcp-server-head" },
      h("span", { class: "mcp-dot", "data-state": kind, "aria-hidden": "true" }),
      h("span", { class: "mcp-name" }, server.name),
      h("span", { class: "mcp-state" }, text),
      server.tools.length ? h("span", { class: "mcp-count" }, `${server.tools.length} tools`) : null);
    const file = String(server.source ?? "").split("/").pop();
    const note = kind === "off"
      ? h("p", { class: "mcp-note" }, `Turned off in ${file}.`)
      : server.error ? h("p", { class: kind === "untrusted" ? "mcp-note" : "mcp-error" }, server.error) : null;
    const act = (/** @type {string} */ label, /** @type {string} */ testid, /** @type {() => void} */ onclick) =>
      h("button", { type: "button", class: "btn btn-sm", "data-testid": testid, onclick }, label);
    const actions = [
      server.state !== "disabled" ? act("Restart", "mcp-restart", () => this.#send(server.name, "mcp_restart_server", { name: server.name })) : null,
      server.editable && kind === "off" ? act("Turn on", "mcp-enable", () => this.#send(server.name, "mcp_set_enabled", { name: server.name, enabled: true })) : null,
      server.editable && kind !== "off" && kind !== "invalid" ? act("Turn off", "mcp-disable", () => this.#send(server.name, "mcp_set_enabled", { name: server.name, enabled: false })) : null,
      server.editable ? act("Remove", "mcp-remove", () => this.#remove(server)) : null,
    ].filter(Boolean);
    return h("li", { class: "mcp-server", "data-testid": "mcp-server", "data-name": server.name, "data-state": server.state, "data-kind": kind },
      h("details", {},
        summary,
        note,
        server.target ? h("p", { class: "mcp-target" }, `${server.transport} · ${server.target}`) : null,
        actions.length ? h("div", { class: "mcp-actions" }, actions) : null,
        h("p", { class: "mcp-error mcp-action-error", role: "alert", hidden: true }),
        tools.length ? h("ul", { class: "mcp-tools" }, tools) : null));
  }

  async #add() {
    const ack = await addServerDialog({ request: this.request, config: this.config });
    if (!ack) return;
    this.polls = 0;
    this.render(ack.mcp);
    const name = ack.mcp?.servers?.at(-1)?.name;
    const added = [...this.list.querySelectorAll(".mcp-server")].find((item) => /** @type {HTMLElement} */ (item).dataset.name === name);
    added?.querySelector("details")?.setAttribute("open", "");
  }

  /** @param {McpServer} server */
  async #remove(server) {
    const answer = await choose({
      title: `Remove the MCP server “${server.name}”?`,
      body: [h("p", { text: `Its entry is deleted from ${server.source} and the server is stopped. Its tools are no longer offered.` })],
      choices: [{ label: "Remove", value: "remove", kind: "danger" }],
      testid: "mcp-remove-dialog",
    });
    if (answer === "remove") await this.#send(server.name, "mcp_remove_server", { name: server.name });
  }

  /** Send one operation; the answer's status is shown, or the refusal under the server.
   * @param {string} name
   * @param {McpOperation} event
   * @param {object} payload */
  async #send(name, event, payload) {
    const ack = await this.request(event, payload);
    if (ack.ok) {
      this.polls = 0;
      this.render(ack.mcp);
      return;
    }
    const item = [...this.list.querySelectorAll(".mcp-server")].find((el) => /** @type {HTMLElement} */ (el).dataset.name === name);
    const error = /** @type {HTMLElement | null | undefined} */ (item?.querySelector(".mcp-action-error"));
    if (!error) return;
    error.textContent = ack.error?.message ?? "The server did not answer.";
    error.hidden = false;
  }

  /** @param {McpServer[]} servers */
  #pollWhileStarting(servers) {
    clearTimeout(this.timer);
    if (!servers.some((s) => s.state === "starting") || this.polls >= POLLS_MAX) return;
    this.polls += 1;
    this.timer = setTimeout(() => this.reload(), POLL_MS);
  }
}
