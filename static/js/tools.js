// @ts-check
// What the page knows of the server's tools, in one table: which calls run code, which change or delete files,
// which are a plan's own or hand work to a sub-agent, and how a call's arguments show. A tool it does not name
// (an MCP server's) is shown as any other. tests/test_page_tools.py holds the table to the server's tools
// (modules/tools/catalogue.py, core/modes.py).

/** The code a command runs: the argument that holds it and its language.
 * @typedef {{argument: string, language: string}} RunsCode */

/**
 * What sets a tool's card apart.
 * @typedef {object} ToolKind
 * @property {RunsCode | null} runs  a command: its card counts the time it runs, its approval shows the code
 * @property {boolean} changesFiles  a call that succeeded changed files: its task offers Undo at once (a
 *   command's task waits for the server to list it as undoable: a command may have changed nothing)
 * @property {boolean} deletes  its approval asks to delete
 * @property {boolean} plan  a plan_execute agent's own bookkeeping: its card shows only when it failed or asks
 * @property {boolean} delegates  hands work to a sub-agent, whose work shows inside its card
 */

/** The tools whose cards differ, by name.
 * @type {Record<string, Partial<ToolKind>>} */
export const TOOL_KINDS = {
  run_command: { runs: { argument: "command", language: "bash" } },
  run_python: { runs: { argument: "code", language: "python" } },
  process_input: { runs: { argument: "text", language: "plaintext" } },
  create_file: { changesFiles: true },
  create_folder: { changesFiles: true },
  modify_file: { changesFiles: true },
  rename_file: { changesFiles: true },
  delete_file: { changesFiles: true, deletes: true },
  make_plan: { plan: true },
  finish_step: { plan: true },
};

/** The tool that hands work to the agent NAME is DELEGATE_PREFIX + NAME. */
export const DELEGATE_PREFIX = "delegate_to_";

/** @param {string} name a tool's name
 * @returns {ToolKind} */
export function toolKind(name) {
  const known = Object.hasOwn(TOOL_KINDS, name) ? TOOL_KINDS[name] : {};
  return {
    runs: known.runs ?? null,
    changesFiles: known.changesFiles ?? false,
    deletes: known.deletes ?? false,
    plan: known.plan ?? false,
    delegates: name.startsWith(DELEGATE_PREFIX),
  };
}

// A call's arguments show by their key, whatever the tool.

/** The keys whose value sums a call up in its card's head: the first one it has. */
export const SUMMARY_KEYS = ["path", "command", "query", "old_path", "directory", "pattern", "scope", "code", "task"];

/** The keys that name a workspace path: a link that opens the file. */
export const PATH_KEYS = ["path", "old_path", "new_path"];

/** The keys that hold a file's text: highlighted as the call's `path` says. */
export const TEXT_KEYS = ["content", "new_content", "old_text", "new_text"];

/** The keys that hold the code a command runs, and its language; while the call asks for approval, the code
 * shows in the approval alone. */
export const CODE_LANGUAGES = Object.fromEntries(
  Object.values(TOOL_KINDS).flatMap(({ runs }) => (runs ? [[runs.argument, runs.language]] : [])),
);
