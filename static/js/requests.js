// @ts-check
// The page's requests to the server and their acks (docs/protocol.md §4.1), as the page reads them: a Request
// resolves to the ack of the event it names. A field an ack has only when it is ok is optional here.

/** @typedef {import("./events.js").Usage} Usage */
/** @typedef {import("./events.js").StatusEvent} StatusEvent */
/** @typedef {import("./events.js").ContextUsage} ContextUsage */
/** @typedef {import("./events.js").FileChange} FileChange */
/** @typedef {import("./history.js").MessageRecord} MessageRecord */
/** @typedef {import("./history.js").ConversationMeta} ConversationMeta */
/** @typedef {import("./agentpicker.js").AgentSummary} AgentSummary */
/** @typedef {import("./agentpicker.js").AgentProblem} AgentProblem */

/** Why a request failed: one of the codes of docs/protocol.md §4.4 ("timeout" when the page gave up waiting).
 * @typedef {{code?: string, message: string, fields?: Record<string, string>}} ErrorBody */

/** Every ack: ok, or the error.
 * @typedef {{ok: boolean, error?: ErrorBody}} Ack */

/** A path changed since the task an undo puts back, and why (docs/protocol.md §4.1 `undo_task`).
 * @typedef {{path: string, action?: string, reason: string, later_message_id?: string}} Conflict */

/** A node of the workspace tree (`get_file_tree`); the root says when the tree was cut.
 * @typedef {{name: string, path: string, is_dir: boolean, children?: TreeNode[], annotation?: string,
 *   truncated?: boolean, entries?: number}} TreeNode */

/** A conversation in the list (`list_conversations`); snippet and snippet_parts with a query.
 * @typedef {{id: string, title: string | null, created_at: string, updated_at: string, tasks: number,
 *   snippet?: string, snippet_parts?: string[]}} ConversationSummary */

/** A skill (`get_status.skills`, §8): one that did not load has only its name and why.
 * @typedef {{name: string, description?: string, user_only?: boolean, broken?: string}} Skill */

/**
 * A configured MCP server (`get_status.mcp`, §10).
 * @typedef {object} McpServer
 * @property {string} name
 * @property {string} source
 * @property {"stdio" | "http" | "sse" | null} transport null: an entry that did not load
 * @property {string | null} target the command's file name, or the URL without its query
 * @property {"connected" | "starting" | "failed" | "disabled"} state
 * @property {string | null} error
 * @property {McpTool[]} tools
 * @property {boolean} [disabled] turned off by the user
 * @property {boolean} [editable] from the user's file, which the page may change
 */
/** @typedef {{name: string, tool: string, read_only: boolean, asks: boolean, description: string}} McpTool */
/** @typedef {{servers: McpServer[], problems: Array<{path: string, message: string}>, config?: string}} McpStatus */

/**
 * `get_status`: the server's configuration and defaults (§4.1); `always_allowed` given a conversation.
 * @typedef {object} StatusFields
 * @property {string} [provider]
 * @property {string} [model]
 * @property {string} [mode]
 * @property {string} [approval]
 * @property {string | null} [workspace_warning]
 * @property {{kind?: string, isolation?: string[]}} [sandbox]
 * @property {ContextUsage} [context]
 * @property {{configured: boolean, key_env?: string, base_url?: string, message?: string}} [api]
 * @property {string | null} [agent]
 * @property {AgentSummary[]} [agents]
 * @property {AgentProblem[]} [agent_problems]
 * @property {Skill[]} [skills]
 * @property {McpStatus} [mcp]
 * @property {boolean} [demo]
 * @property {string[]} [demo_suggestions]
 * @property {boolean} [demo_reset]
 * @property {string[]} [always_allowed]
 */
/** @typedef {Ack & StatusFields} StatusAck */

/**
 * `get_conversation`: the conversation's meta.json, its records up to `seq`, and what its next task runs with.
 * @typedef {object} ConversationFields
 * @property {ConversationMeta} [conversation]
 * @property {MessageRecord[]} [messages]
 * @property {number} [seq]
 * @property {boolean} [running]
 * @property {string[]} [undoable] the tasks (their user message ids) that can be undone, newest first
 * @property {string} [mode]
 * @property {string} [approval]
 * @property {string | null} [agent]
 * @property {string[]} [focus]
 * @property {number} [context_limit]
 * @property {StatusEvent} [status] the running task's latest `status`
 * @property {{conversation: Usage, today: Usage}} [spend]
 */
/** @typedef {Ack & ConversationFields} ConversationAck */

/**
 * A background process of a conversation (`list_processes`, docs/protocol.md §4.1).
 * @typedef {object} ProcessItem
 * @property {string} id
 * @property {number} [pid]
 * @property {string} command
 * @property {string} [origin] "agent" or "user"
 * @property {string | null} [started_at]
 * @property {boolean} running
 * @property {number | null} [exit_code]
 * @property {number | null} [signal]
 * @property {string | null} [end_reason]
 * @property {number[]} ports
 * @property {number} [output_end] the byte offset after everything it wrote
 */
/** @typedef {Ack & {text?: string, offset?: number, skipped?: number, next_offset?: number, output_end?: number,
 *   running?: boolean, exit_code?: number | null}} ProcessOutputAck */

/** A workspace file as the editor opens it (`open_file`): its text (null when binary), the version a save names,
 * and why it is read-only (null when it is not).
 * @typedef {{path: string, size: number, content: string | null, version: string, read_only: string | null}} OpenedFile */

/** The user's settings as `get_settings` and `set_settings` answer them: each setting's value (the key's never,
 * only whether one is set), where it comes from and whether this run fixes it; the provider presets; the file.
 * @typedef {{value?: any, set?: boolean, source: string, fixed: boolean, variable: string}} SettingEntry
 * @typedef {{settings?: Record<string, SettingEntry>, path?: string, active?: {provider: string, model: string},
 *   providers?: Array<{name: string, base_url: string | null, model: string | null, key_env: string | null}>,
 *   api?: {configured: boolean, message?: string | null}}} SettingsView */

/**
 * The ack of each request the page makes, by event name.
 * @typedef {object} AckMap
 * @property {Ack & {conversation_id?: string, message_id?: string}} send_message
 * @property {Ack} cancel
 * @property {Ack & {always_allowed?: string[]}} approve
 * @property {Ack & {always_allowed?: string[]}} revoke_approval
 * @property {Ack & {running?: boolean, last_seq?: number, replays_after?: number}} join
 * @property {Ack & {conversations?: ConversationSummary[], running?: string[]}} list_conversations
 * @property {ConversationAck} get_conversation
 * @property {Ack & {tree?: TreeNode, live_stopped?: string}} get_file_tree the tree; why it no longer follows changes
 * @property {StatusAck} get_status
 * @property {Ack & {restored?: string[], removed?: string[], skipped?: string[], conflicts?: Conflict[], message?: string}} undo_task
 * @property {Ack & {message_id?: string, undone?: boolean, files?: Array<{path: string, action: string}>, conflicts?: Conflict[]}} undo_preview
 * @property {Ack & {change?: Pick<FileChange, "event" | "path" | "is_dir">}} apply_edit
 * @property {Ack} discard_edit
 * @property {Ack & {edits?: Array<{id: string, path: string, diff: string, created_at: string}>}} list_edits
 * @property {Ack & {tasks?: import("./changes.js").TaskChanges[], since_start?: import("./changes.js").ChangedFile[] | null}} changes
 * @property {import("./changesgit.js").GitStatus} git_status
 * @property {Ack & {diff?: string, staged?: boolean, truncated?: boolean}} git_diff
 * @property {Ack} git_stage
 * @property {Ack} git_unstage
 * @property {Ack & {commit?: string, summary?: string}} git_commit
 * @property {Ack & {title?: string}} rename_conversation
 * @property {Ack} delete_conversation
 * @property {Ack & {focus?: string[]}} focus_file
 * @property {Ack & {focus?: string[]}} unfocus_file
 * @property {Ack & {main?: string, task?: string | null, limit?: number}} get_memory
 * @property {Ack & {content?: string, limit?: number}} set_memory
 * @property {Ack & {scheduled?: boolean}} compact
 * @property {Ack & {deleted?: number}} demo_reset
 * @property {Ack & {mcp?: McpStatus}} mcp_add_server
 * @property {Ack & {mcp?: McpStatus}} mcp_set_enabled
 * @property {Ack & {mcp?: McpStatus}} mcp_remove_server
 * @property {Ack & {mcp?: McpStatus}} mcp_restart_server
 * @property {Ack & {processes?: ProcessItem[], seq?: number}} list_processes
 * @property {ProcessOutputAck} process_output
 * @property {Ack & {process?: ProcessItem}} stop_process
 * @property {Ack & {process?: ProcessItem}} restart_process
 * @property {Ack & {url?: string, process_id?: string, port?: number}} open_app
 * @property {Ack & {terminal_id?: string}} terminal_open
 * @property {Ack & {data?: string, offset?: number, next_offset?: number}} terminal_attach
 * @property {Ack & {terminals?: Array<{terminal_id: string, rows: number, cols: number}>}} list_terminals
 * @property {Ack & {file?: OpenedFile}} open_file
 * @property {Ack & {file?: OpenedFile, current?: OpenedFile | null, needs_confirmation?: boolean}} save_file
 * @property {Ack & SettingsView} get_settings
 * @property {Ack & SettingsView} set_settings
 */

/**
 * The ack of event N (a plain Ack for an event the map does not name).
 * @template {string} N
 * @typedef {N extends keyof AckMap ? AckMap[N] : Ack} AckOf
 */

/**
 * Emit event N and resolve with its ack; one that gets no answer (a timeout, a lost connection) resolves to
 * an ack with ok false (connection.js).
 * @typedef {<N extends string>(event: N, payload?: object, timeoutMs?: number) => Promise<AckOf<N>>} Request
 */

export {};
