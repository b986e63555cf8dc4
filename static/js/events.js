// @ts-check
// The server's events as the page receives them: their names and payloads. Task events are the
// dataclasses of protocol/events.py, sent by `to_wire` (None fields left out, so optional here);
// `conversation_update`, `deltas` and `file_tree` outside a task come from web/.
// tests/test_page_events.py checks that SERVER_EVENTS and DELTAS_EVENT name every event the server sends.

/**
 * What every task event may carry (protocol/events.py `Event`): the core stamps `conversation_id` and
 * `seq`; a sub-agent's events have `parent_call_id` and `depth`. A `file_tree` from the workspace
 * watcher, an upload or an undo (outside any task) has none of them.
 * @typedef {object} EventBase
 * @property {string} [conversation_id]
 * @property {number} [seq]
 * @property {string} [agent] the agent whose task reported it
 * @property {string} [parent_call_id] a sub-agent's: the delegating call it runs under
 * @property {number} [depth] a sub-agent's: 1 under the top agent, 2 under a sub-agent
 */

/**
 * `token`: a delta of the answer being streamed (protocol/events.py `Token`).
 * @typedef {EventBase & {message_id: string, text: string}} TokenEvent
 */

/**
 * `thinking`: a delta of the model's reasoning (protocol/events.py `Thinking`).
 * @typedef {EventBase & {message_id: string, text: string}} ThinkingEvent
 */

/**
 * `user_message`: the user's message a task starts with, its first event (protocol/events.py `UserMessage`):
 * `message_id` its record's id, `parent_id` the message it follows (null: a root), what it was sent with.
 * @typedef {object} UserMessageFields
 * @property {string} message_id
 * @property {string} text
 * @property {string | null} parent_id
 * @property {"fast" | "thinking"} [mode]
 * @property {string} [skill]
 * @property {import("./history.js").Attachment[]} [attachments]
 */
/** @typedef {EventBase & UserMessageFields} UserMessageEvent */

/** @typedef {"start" | "args" | "end" | "approval" | "output" | "result"} ToolPhase */

/**
 * `tool`: a tool call's progress (protocol/events.py `ToolEvent`; its `tool` goes out as `name`).
 * @typedef {object} ToolFields
 * @property {string} call_id
 * @property {string} name the tool's name
 * @property {ToolPhase} phase
 * @property {string} [delta] `args` and `output`: the next piece of the arguments' JSON or of the output
 * @property {unknown} [arguments] `end`: the parsed arguments (the raw text when they are not valid)
 * @property {string} [preview] `approval`: what the user approves
 * @property {string[]} [warnings] `approval`: what a reader could miss in the preview
 * @property {boolean} [ok] `result`
 * @property {string} [output] `result`
 * @property {number} [duration_ms] `result`
 * @property {boolean} [declined] `result` (extension): true when the user declined the call; absent otherwise
 * @property {{proposal?: {id: string, path: string, diff: string}, plan?: Plan} & Record<string, unknown>} [details] `result`:
 *   structured extras (a proposed edit's `proposal`, a plan tool's `plan`)
 */
/** @typedef {EventBase & ToolFields} ToolEvent */

/** @typedef {"idle" | "thinking" | "streaming" | "tool"} TaskState */

/**
 * The context window's use (protocol/events.py `ContextUsage`).
 * @typedef {object} ContextUsage
 * @property {number} used_tokens
 * @property {number} limit_tokens
 */

/**
 * `status`: what the task is doing (protocol/events.py `Status`).
 * `usage` (extension): the running task's tokens and cost so far.
 * @typedef {EventBase & {state: TaskState, iteration: number, context: ContextUsage, usage?: Usage}} StatusEvent
 */

/**
 * One step of a plan (protocol/records.py `PlanStepMeta`).
 * @typedef {object} PlanStep
 * @property {number} index
 * @property {string} title
 * @property {"pending" | "running" | "done" | "failed"} status
 * @property {string} [summary]
 */

/**
 * A whole plan: `revision` counts the re-plans.
 * @typedef {{revision: number, steps: PlanStep[]}} Plan
 */

/** @typedef {"created" | "step_started" | "step_finished" | "replanned" | "finished"} PlanPhase */

/**
 * `plan`: a plan_execute agent's plan as it changes; `plan` is always the whole current plan
 * (protocol/events.py `PlanEvent`).
 * @typedef {object} PlanFields
 * @property {PlanPhase} phase
 * @property {Plan} plan
 * @property {number} [step]
 * @property {string} [status]
 * @property {string} [summary]
 * @property {string} [reason]
 */
/** @typedef {EventBase & PlanFields} PlanEvent */

/** @typedef {"condensing" | "condensed" | "failed"} ContextPhase */

/**
 * `context`: the history being condensed (protocol/events.py `ContextEvent`): `condensing`, then
 * `condensed` (with `tokens_after`, `message_id`, `first_kept_id`, `summarized`, `summary`) or
 * `failed` (with `message`).
 * @typedef {object} ContextFields
 * @property {ContextPhase} phase
 * @property {"threshold" | "user"} trigger
 * @property {number} tokens_before
 * @property {number} limit_tokens
 * @property {number} [tokens_after]
 * @property {string} [message_id] the summary record
 * @property {string} [first_kept_id] the first record still sent as it is
 * @property {number} [summarized] the records the summary replaces
 * @property {string} [summary]
 * @property {string} [message]
 */
/** @typedef {EventBase & ContextFields} ContextEvent */

/**
 * `process`: a background process of the conversation's sandbox session (protocol/events.py `Process`), sent
 * between tasks too. The page admits it to the conversation's seq order (a join's replay counts it); the
 * processes panel is yet to come.
 * @typedef {object} ProcessFields
 * @property {string} process_id
 * @property {"started" | "output" | "ports" | "exited"} phase
 * @property {string} [command]
 * @property {number} [pid]
 * @property {string} [origin]
 * @property {number[]} [ports]
 * @property {string} [delta] output text beginning at byte `offset`
 * @property {number} [offset]
 * @property {number} [skipped] bytes before it no longer kept
 * @property {number} [exit_code]
 * @property {number} [signal]
 * @property {string} [reason]
 */
/** @typedef {EventBase & ProcessFields} ProcessEvent */

/**
 * A person's terminal's output (protocol/terminals.py TerminalOutput), sent only to the clients attached to it.
 * @typedef {object} TerminalEvent
 * @property {string} conversation_id
 * @property {string} terminal_id
 * @property {number} offset byte offset of `data`'s first byte in the terminal's output
 * @property {string} data
 * @property {boolean} [ended]
 */

/**
 * `notice`: something the user should know that does not end the task (protocol/events.py `Notice`).
 * @typedef {EventBase & {code: string, message: string, seconds?: number}} NoticeEvent
 */

/**
 * `error` (protocol/events.py `Error`).
 * @typedef {EventBase & {code: string, message: string}} ErrorEvent
 */

/** @typedef {"complete" | "cancelled" | "max_iterations" | "error" | "interrupted" | "budget" | "loop"} DoneReason */

/**
 * The tokens a task used (protocol/events.py `Usage`).
 * @typedef {{prompt_tokens: number, completion_tokens: number, estimated?: boolean, cached_prompt_tokens?: number, cost?: Money | null}} Usage
 */

/**
 * An amount of money (protocol/events.py `Money`); a null cost is "price unknown".
 * @typedef {{amount: number, currency: string}} Money
 */

/**
 * `done`: the task ended (protocol/events.py `Done`); a sub-agent's has `parent_call_id`.
 * @typedef {EventBase & {reason: DoneReason, usage: Usage, budget?: import("./budget.js").BudgetEnd}} DoneEvent
 */

/**
 * A change in the workspace (protocol/events.py `FileChange`, every field sent; `dest_path` is
 * null but for a move).
 * @typedef {object} FileChange
 * @property {"created" | "modified" | "deleted" | "moved"} event
 * @property {string} path
 * @property {boolean} is_dir
 * @property {string | null} dest_path
 */

/**
 * A folder whose changes in one watcher batch were too many to list (protocol/events.py
 * `FolderRefresh`): reload it; `count` changes were left out of `changes`; "" is the workspace.
 * @typedef {object} FolderRefresh
 * @property {string} path
 * @property {number} count
 */

/**
 * `file_tree`: workspace changes, from a task (protocol/events.py `FileTree`) or outside any (the
 * watcher, an upload, an undo: web/state.py, web/routes.py, web/handlers.py).
 * @typedef {EventBase & {changes: FileChange[], refresh?: FolderRefresh[]}} FileTreeEvent
 */

/**
 * `conversation_update`: to every client, a conversation list entry changed (web/manage.py,
 * core/web_terminal.py `announce`): renamed, deleted, started or finished.
 * @typedef {object} ConversationUpdate
 * @property {string} id
 * @property {string | null} [title] `null`: a conversation without a title yet
 * @property {boolean} [deleted]
 * @property {boolean} [running]
 */

/**
 * `deltas`: several `token` or `thinking` deltas gathered (web/transport/delta_batcher.py), for a
 * client that connected with `batch_deltas`; `first_seq + i` is the seq of `texts[i]`, `seq` the
 * last one's. Connection unpacks them into the events they gather.
 * @typedef {object} DeltasFields
 * @property {"token" | "thinking"} of
 * @property {string} message_id
 * @property {number} first_seq
 * @property {number} seq
 * @property {string[]} texts
 * @property {string} conversation_id
 * @property {string} [agent]
 * @property {string} [parent_call_id]
 * @property {number} [depth]
 */
/** @typedef {DeltasFields} DeltasEvent */

/**
 * The payload of each server event the page handles, by name.
 * @typedef {object} ServerEventMap
 * @property {UserMessageEvent} user_message
 * @property {TokenEvent} token
 * @property {ThinkingEvent} thinking
 * @property {ToolEvent} tool
 * @property {PlanEvent} plan
 * @property {FileTreeEvent} file_tree
 * @property {StatusEvent} status
 * @property {NoticeEvent} notice
 * @property {ErrorEvent} error
 * @property {DoneEvent} done
 * @property {ConversationUpdate} conversation_update
 * @property {ContextEvent} context
 * @property {ProcessEvent} process
 * @property {TerminalEvent} terminal
 */

/** @typedef {keyof ServerEventMap} ServerEventName */

/**
 * A server event as the handlers take it, `(name, payload)`: naming the event narrows its payload.
 * @typedef {{[N in ServerEventName]: [name: N, payload: ServerEventMap[N]]}[ServerEventName]} ServerEventArgs
 */

/**
 * The events of protocol/events.py (all but `conversation_update` and `terminal`): they may carry the `EventBase`
 * fields.
 * @typedef {Exclude<ServerEventName, "conversation_update" | "terminal">} CoreEventName
 */

/**
 * A core event as the handlers take it, `(name, payload)`.
 * @typedef {{[N in CoreEventName]: [name: N, payload: ServerEventMap[N]]}[CoreEventName]} CoreEventArgs
 */

/**
 * The payload of any server event the page handles.
 * @typedef {ServerEventMap[ServerEventName]} ServerEventPayload
 */

/**
 * The server's events the page handles, each as it comes (connection.js listens to each).
 * @type {ServerEventName[]}
 */
export const SERVER_EVENTS = ["user_message", "token", "thinking", "tool", "plan", "file_tree", "status", "notice", "error", "done", "conversation_update", "context", "process", "terminal"];

/** The gathered deltas, unpacked by connection.js into the `token` and `thinking` events they hold. */
export const DELTAS_EVENT = "deltas";
