// @ts-check
// The server's events applied to the page: a task event of the open conversation goes to the conversation
// pane and the status bar once the feed (taskfeed.js) admits it in seq order; a change to the workspace goes to
// the file tree, a change to a conversation to the list, whichever conversation is open.
import { showUserMessage } from "./usermessage.js";

/** @typedef {import("./events.js").ServerEventArgs} ServerEventArgs */
/** @typedef {import("./events.js").CoreEventArgs} CoreEventArgs */
/** @typedef {import("./events.js").ConversationUpdate} ConversationUpdate */
/** @typedef {import("./events.js").ContextEvent} ContextEvent */
/** @typedef {import("./events.js").StatusEvent} StatusEvent */
/** @typedef {import("./session.js").Session} Session */

export class ConversationEvents {
  /** @param {Session} session the open conversation, and the parts of the page it shows in */
  constructor(session) {
    this.session = session;
    /** @type {((event: import("./events.js").ProcessEvent) => void) | null} the processes panel's (app.js) */
    this.onProcess = null;
    /** @type {((event: import("./events.js").TerminalEvent) => void) | null} the terminal panel's (app.js) */
    this.onTerminal = null;
  }

  /** A server event (connection.js), or one held back and delivered now (taskfeed.js).
   * @param {ServerEventArgs} event */
  handle(...event) {
    const { session } = this;
    if (event[0] === "conversation_update") return void this.#onConversationUpdate(event[1]);
    if (event[0] === "terminal") return void this.onTerminal?.(event[1]); // only to the clients attached to it
    const [name, payload] = event; // one of protocol/events.py's
    const cid = payload.conversation_id ?? null;
    if (!cid) {
      if (name === "file_tree") session.tree.apply(payload.changes ?? [], payload.refresh ?? []);
      else if (name === "error") session.chat.onError(payload);
      else if (name === "notice" && payload.code === "live_tree_stopped") session.tree.showStopped(payload.message ?? "");
      return;
    }
    if (!session.feed.admit(cid, ...event)) return;
    if (name === "done") session.conversations.refresh();
    if (name === "file_tree") return void session.tree.apply(payload.changes ?? [], payload.refresh ?? []);
    if (cid !== session.cid) return;
    this.#apply(...event);
  }

  /** Whether a conversation's task runs changed (taskfeed.js says so): its dot in the list, and for the open one
   * the composer, the edit buttons and the Undo rows.
   * @param {string} cid */
  runningChanged(cid) {
    const { session } = this;
    const running = session.feed.isRunning(cid);
    session.conversations.setRunning(cid, running);
    if (cid !== session.cid) return;
    session.composer.setRunning(running);
    session.chat.setEditable(!running);
    if (running) session.chat.setBusy(true);
    else session.chat.safety.place(); // the Undo its end guessed waited for the task to stop running
    if (session.index) session.chat.decorate(session.index);
  }

  /** @param {CoreEventArgs} event */
  #apply(...[name, payload]) {
    const { chat, statusBar } = this.session;
    const top = !payload.parent_call_id; // not a sub-agent's
    if (top && payload.agent && payload.agent !== statusBar.agent) statusBar.setAgent(payload.agent);
    switch (name) {
      case "user_message": showUserMessage(this.session, payload); break;
      case "token": chat.onToken(payload); break;
      case "thinking":
        chat.onThinking(payload);
        statusBar.setReasoning(top ? null : payload.agent);
        break;
      case "tool": chat.onTool(payload); break;
      case "plan": chat.onPlan(payload); break;
      case "error": chat.onError(payload); break;
      case "notice": chat.showNotice(payload.message ?? "", "info"); break;
      case "context": this.#onContext(payload); break;
      case "process": this.onProcess?.(payload); break;
      case "status": this.#onStatus(payload, top); break;
      case "done":
        chat.onDone(payload);
        statusBar.setTask("idle");
        this.session.refresh(this.session.cid);
        break;
      default: break;
    }
  }

  /** @param {StatusEvent} payload
   * @param {boolean} top the top agent's, not a sub-agent's */
  #onStatus(payload, top) {
    const { chat, statusBar } = this.session;
    chat.onStatus(payload);
    statusBar.setTask(payload.state, payload.iteration, top ? null : payload.agent);
    if (payload.context && top) statusBar.setContext(payload.context);
    if (payload.usage) statusBar.setSpend({ task: payload.usage });
  }

  /** Another tab (or this one) renamed, deleted, started or finished a conversation.
   * @param {ConversationUpdate} update */
  #onConversationUpdate(update) {
    const { conversations, feed, cid } = this.session;
    const id = update.id;
    if (!id) return;
    if (update.deleted) {
      conversations.remove(id);
      return;
    }
    if (typeof update.running === "boolean" && (id !== cid || !update.running)) {
      conversations.setRunning(id, update.running || feed.isRunning(id));
    }
    if (update.title !== undefined) conversations.setTitle(id, update.title);
  }

  /** The history being condensed: the notice while it is, then the summary in place of what it replaces.
   * @param {ContextEvent} payload */
  #onContext(payload) {
    const { session } = this;
    session.statusBar.setCondensing(payload.phase === "condensing");
    if (payload.phase !== "condensed") return void session.chat.onContext(payload);
    session.statusBar.setContext({ used_tokens: payload.tokens_after, limit_tokens: payload.limit_tokens });
    if (!session.chat.onContext(payload)) session.open(session.cid); // the first kept message is not shown here
    else if (!session.feed.isRunning(session.cid)) session.refresh(session.cid);
  }
}
