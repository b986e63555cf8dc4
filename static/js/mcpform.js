// @ts-check
// The MCP panel's "Add a server" dialog: a command line (with its environment) or a URL (with its headers),
// sent as `mcp_add_server`; the server's refusal is shown in the dialog, which stays open.
import { h } from "./dom.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const VARIABLE = /^[A-Za-z_][A-Za-z0-9_-]{0,127}$/;

/** A command line split into words as a shell would: quotes group, a backslash escapes the next character.
 * @param {string} line
 * @returns {string[]} */
export function splitCommand(line) {
  const words = [];
  /** @type {string | null} */
  let word = null;
  /** @type {string | null} */
  let quote = null;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < line.length) word += line[(i += 1)];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === "\\" && i + 1 < line.length) {
      word = (word ?? "") + line[(i += 1)];
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? "") + c;
    }
  }
  if (quote) throw new Error(`a ${quote} quote is not closed`);
  if (word !== null) words.push(word);
  return words;
}

/** "NAME=value" (or "Name: value") lines into an object; blank lines are skipped.
 * @param {string} text
 * @param {"=" | ":"} separator
 * @param {string} what */
function pairs(text, separator, what) {
  /** @type {Record<string, string>} */
  const found = {};
  for (const raw of text.split("\n")) {
    if (!raw.trim()) continue;
    const at = raw.indexOf(separator);
    const key = at < 0 ? "" : raw.slice(0, at).trim();
    if (!VARIABLE.test(key)) throw new Error(`${what}: write each as NAME${separator === "=" ? "=value" : ": value"} (“${raw.trim().slice(0, 40)}”)`);
    found[key] = raw.slice(at + 1).trim();
  }
  return found;
}

/** @param {string} label
 * @param {HTMLElement} control
 * @param {string} [hint] */
function field(label, control, hint) {
  return h("label", { class: "mcp-field" }, h("span", { class: "mcp-field-label", text: label }), control,
    hint ? h("span", { class: "mcp-field-hint", text: hint }) : null);
}

/** @typedef {import("./requests.js").AckMap["mcp_add_server"]} AddAck */

/** The form's inputs: a name, what kind of server, a command and its environment (stdio) or a URL and its
 * headers (HTTP, SSE), each pair in a group shown for its kind. */
function serverFields() {
  const input = (/** @type {Record<string, string | number | boolean>} */ attrs) => /** @type {HTMLInputElement} */ (h("input", attrs));
  const area = (/** @type {Record<string, string | number | boolean>} */ attrs) => /** @type {HTMLTextAreaElement} */ (h("textarea", attrs));
  const name = input({ type: "text", required: true, maxlength: 64, "data-testid": "mcp-add-name", autocomplete: "off", spellcheck: "false" });
  const kind = /** @type {HTMLSelectElement} */ (h("select", { "data-testid": "mcp-add-kind" },
    h("option", { value: "command" }, "A command on this machine (stdio)"),
    h("option", { value: "url" }, "A URL (streamable HTTP)"),
    h("option", { value: "sse" }, "A URL (SSE)")));
  const command = input({ type: "text", "data-testid": "mcp-add-command", autocomplete: "off", spellcheck: "false", placeholder: "npx -y @modelcontextprotocol/server-memory" });
  const env = area({ rows: 2, "data-testid": "mcp-add-env", spellcheck: "false", placeholder: "API_KEY=…" });
  const url = input({ type: "url", "data-testid": "mcp-add-url", autocomplete: "off", placeholder: "https://example.com/mcp" });
  const headers = area({ rows: 2, "data-testid": "mcp-add-headers", spellcheck: "false", placeholder: "Authorization: Bearer …" });
  const local = h("div", { class: "mcp-fields" },
    field("Command", command, "Split as a shell would: quote an argument that holds spaces."),
    field("Environment", env, "One NAME=value a line. The server gets only these and a small base (PATH, HOME…)."));
  const remote = h("div", { class: "mcp-fields", hidden: true }, field("URL", url), field("Headers", headers, "One Name: value a line."));
  kind.addEventListener("change", () => {
    local.hidden = kind.value !== "command";
    remote.hidden = kind.value === "command";
  });
  return { name, kind, command, env, url, headers, local, remote };
}

/** mcp_add_server's payload from the form; throws an Error saying what to fix.
 * @param {ReturnType<typeof serverFields>} fields */
function serverPayload({ name, kind, command, env, url, headers }) {
  const payload = { name: name.value.trim() };
  if (!NAME.test(payload.name)) throw new Error("Name: letters, digits, “.”, “_” or “-”, starting with a letter or digit (at most 64).");
  if (kind.value === "command") {
    const [program, ...args] = splitCommand(command.value.trim());
    if (!program) throw new Error("Command: type the program to run and its arguments.");
    return { ...payload, command: program, args, env: pairs(env.value, "=", "Environment") };
  }
  if (!/^https?:\/\//.test(url.value.trim())) throw new Error("URL: it starts with http:// or https://.");
  return { ...payload, url: url.value.trim(), transport: kind.value === "sse" ? "sse" : "http", headers: pairs(headers.value, ":", "Headers") };
}

/** Open the dialog; resolves with the accepted ack (its `mcp`), or null when cancelled.
 * @param {{ request: import("./requests.js").Request, config: string | null }} options errors come back as acks
 * @returns {Promise<AddAck | null>} */
export function addServerDialog({ request, config }) {
  return new Promise((resolve) => {
    const fields = serverFields();
    const error = h("p", { class: "mcp-form-error", role: "alert", "data-testid": "mcp-add-error", hidden: true });
    const submit = h("button", { type: "submit", class: "btn btn-primary", "data-testid": "mcp-add-submit" }, "Add and start");
    const cancel = h("button", { type: "button", class: "btn" }, "Cancel");
    const form = /** @type {HTMLFormElement} */ (h("form", { method: "dialog", class: "mcp-form" },
      field("Name", fields.name, "Its tools are offered as mcp__NAME__TOOL."),
      field("Server", fields.kind), fields.local, fields.remote,
      h("p", { class: "mcp-form-note", text: `Saved in ${config ?? "your MCP file"}. A command runs on this machine with the server's rights, outside the sandbox.` }),
      error,
      h("div", { class: "ask-actions" }, cancel, submit)));
    const dialog = /** @type {HTMLDialogElement} */ (h("dialog", { class: "ask-dialog mcp-add-dialog", "data-testid": "mcp-add-dialog", "aria-labelledby": "mcp-add-title" },
      h("h2", { class: "ask-title", id: "mcp-add-title", text: "Add an MCP server" }), form));
    const finish = (/** @type {AddAck | null} */ value) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const fail = (/** @type {string} */ text) => {
      error.textContent = text;
      error.hidden = false;
    };
    cancel.addEventListener("click", () => finish(null));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(null);
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.hidden = true;
      let payload;
      try {
        payload = serverPayload(fields);
      } catch (problem) {
        fail(problem instanceof Error ? problem.message : String(problem));
        return;
      }
      submit.setAttribute("disabled", "");
      const ack = await request("mcp_add_server", payload);
      submit.removeAttribute("disabled");
      if (ack.ok) finish(ack);
      else fail(ack.error?.message ?? "The server did not answer.");
    });
    document.body.append(dialog);
    dialog.showModal();
    fields.name.focus();
  });
}
