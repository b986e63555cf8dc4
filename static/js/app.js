// @ts-check
// Entry point of the main page: builds the parts and wires them to the connection.
import { Attention } from "./attention.js";
import { ChangesPanel } from "./changes.js";
import { ChatView } from "./chat.js";
import { pageCommands } from "./commands.js";
import { Composer } from "./composer.js";
import { Connection } from "./connection.js";
import { renderDemoBanner } from "./demobadge.js";
import { ConversationList } from "./conversations.js";
import { Drawer } from "./drawer.js";
import { FileEditor } from "./editor.js";
import { FileTree } from "./filetree.js";
import { Followup, lastUserRecord } from "./followup.js";
import { McpPanel } from "./mcppanel.js";
import { MemoryPanel } from "./memorypanel.js";
import { PathCompleter } from "./pathcomplete.js";
import { FilePreview } from "./preview.js";
import { ProcessesPanel } from "./processes.js";
import { AlwaysAllowed } from "./safety.js";
import { Session } from "./session.js";
import { SettingsPanel } from "./settingspanel.js";
import { renderApiSetup } from "./setup.js";
import { StatusBar } from "./statusbar.js";
import { TerminalPanel } from "./terminal.js";

const $ = (selector) => document.querySelector(selector);
const BANNER_TEXT = {
  disconnected: "Disconnected by the server.",
  refused: "The server refused the connection. Open the address with the token that the server printed.",
  wrong_token: "The server restarted with another access token, so this tab cannot connect again. Open the address it printed "
    + "at start (the line “Workspace Agent: http://…/?token=…” where `make run` or `python main.py web` runs; the token is also "
    + "in the file web_token of its data folder, ./data/web_token by default).",
};

/** Keep the open conversation in the address bar, and never the token (the cookie carries it). */
function rememberConversation(cid) {
  const url = new URL(window.location.href);
  url.searchParams.delete("token");
  url.hash = cid ? `c=${encodeURIComponent(cid)}` : "";
  window.history.replaceState(null, "", url.pathname + url.search + url.hash);
}

function conversationFromUrl() {
  const match = window.location.hash.match(/^#c=([^&]+)/);
  return match ? decodeURIComponent(match[1]) : null;
}

class App {
  constructor(token) {
    this.token = token;
    this.initialConversation = conversationFromUrl();
    rememberConversation(this.initialConversation);
    /** @type {import("./requests.js").Request} */
    const request = (event, payload, timeoutMs) => this.conn.request(event, payload, timeoutMs);
    this.openCid = null;
    this.attention = new Attention($("#notify-toggle"), {
      titleOf: (cid) => this.conversations.titleOf(cid),
      onShow: (cid) => { if (cid !== this.session.cid) this.session.open(cid); },
    });
    this.drawer = new Drawer({ sidebar: $("#sidebar"), toggle: $("#sidebar-toggle"), backdrop: $(".drawer-backdrop") });
    this.#buildSidebar(request);
    this.#buildMain();
    this.session = new Session({
      request,
      chat: this.chat,
      conversations: this.conversations,
      statusBar: this.statusBar,
      tree: this.tree,
      composer: this.composer,
      onOpen: (cid) => this.#onOpen(cid),
    });
    this.session.events.onProcess = (event) => this.processes.apply(event);
    this.pathCompleter = new PathCompleter($("#message-input"), {
      paths: () => [...this.tree.nodes.values()].filter((node) => !node.isDir).map((node) => node.path),
      onPick: (path) => this.session.setFocused(path, true),
    });
    this.terminals = new TerminalPanel($("#terminal-panel"), {
      request, toggle: $("#terminal-toggle"), onSendToAgent: (text) => this.#toComposer(text),
    });
    this.session.events.onTerminal = (event) => this.terminals.apply(event);
    this.changes = new ChangesPanel($("#changes-panel"), {
      request, toggle: $("#changes-toggle"), onAsk: (text) => this.#toComposer(text),
      onMarks: (marks) => this.tree.setGitMarks(marks), onBranch: (branch) => this.statusBar.setBranch(branch),
    });
    this.tree.onUpdated = () => this.changes.changed();
    this.conn = new Connection({
      token,
      onEvent: (...event) => {
        this.attention.onEvent(...event);
        this.session.handleEvent(...event);
      },
      onState: (state, detail) => this.#onConnectionState(state, detail),
    });
    this.#bindControls();
    this.chat.showWelcome();
    if (this.initialConversation) this.chat.showLoading();
    this.composer.focus();
  }

  /** @param {import("./requests.js").Request} request */
  #buildSidebar(request) {
    this.statusBar = new StatusBar($("#status-bar"));
    this.statusBar.onCompact = () => this.session.compact();
    this.conversations = new ConversationList($("#conversation-list"), {
      search: $("#conversation-search"),
      request,
      onSelect: (cid) => this.session.open(cid),
      onTitle: (title) => this.#setTitle(title),
      onDeleted: (cid) => this.session.deleted(cid),
    });
    this.preview = new FilePreview($("#file-preview"), { token: this.token, onClose: () => this.tree.select(null) });
    this.editor = new FileEditor($("#file-editor"), { request, onClose: () => this.tree.select(null) });
    this.tree = new FileTree($("#file-tree"), {
      load: () => request("get_file_tree", {}),
      onOpenFile: (path) => this.#show(path),
      onRootName: (name) => { $("#workspace-name").textContent = name ?? ""; },
      onChange: (/** @type {{path: string, event: string, dest_path?: string | null}} */ change) => {
        this.preview.changed(change.path, change.event, change.dest_path);
        this.editor.changed(change.path, change.event, change.dest_path);
      },
      onFolderChange: (folder) => this.preview.changedUnder(folder),
      onFocus: (path, focused) => this.session.setFocused(path, focused),
    });
    this.memory = new MemoryPanel($("#memory-button"), { request, conversationId: () => this.session.cid });
    this.settings = new SettingsPanel({ request, onSaved: () => this.loadStatus() });
    $("#settings-button").addEventListener("click", () => this.settings.open());
    this.mcpPanel = new McpPanel($("#mcp-panel"), { reload: () => this.loadStatus(), request });
    this.processes = new ProcessesPanel($("#processes-panel"), {
      request, count: $("#status-bar [data-role=processes]"), reveal: () => this.drawer.setOpen(true),
    });
    this.loadStatus = async () => {
      const status = await request("get_status", {});
      if (!status.ok) return;
      this.mcpPanel.render(status.mcp);
      this.statusBar.setInfo(status);
      this.composer.setDefaults(status);
      this.session.showChoices();
      renderApiSetup($("#api-setup-panel"), status, this.loadStatus, () => this.settings.open());
      const readOnly = $("#workspace-warning");
      readOnly.textContent = status.workspace_warning ? `Read-only workspace: ${status.workspace_warning}.` : "";
      readOnly.hidden = !status.workspace_warning;
      this.chat.setExamples(status.demo ? status.demo_suggestions : null);
      renderDemoBanner($("#demo-banner"), status, {
        onPick: (text) => this.composer.fill(text),
        request,
        onStartedOver: () => this.#startedOver(),
        onFailed: (message) => this.chat.showNotice(message, "error"),
      });
    };
  }

  #buildMain() {
    this.chat = new ChatView($("#conversation"), $("#chat-scroll"), {
      onEdit: (record, text) => this.session.edit(record, text),
      onSwitch: (id) => this.session.switchBranch(id),
      onRegenerate: () => this.#retry(),
      onApprove: async (callId, approved, always) => {
        const ack = await this.session.approve(callId, approved, always);
        if (ack?.ok) this.attention.resolved(callId);
        if (Array.isArray(ack?.always_allowed)) this.allowed.set(ack.always_allowed);
        return ack;
      },
      onExample: (text) => this.composer.fill(text),
      ...this.#safetyHandlers(),
    });
    const jump = $("#jump-latest");
    this.chat.onScrollState = (atBottom) => { jump.hidden = atBottom; };
    jump.addEventListener("click", () => this.chat.scrollToBottom());
    this.composer = this.#buildComposer();
    this.followup = new Followup($("#conversation"), {
      onRetry: () => this.#retry(),
      onContinue: () => this.session.send("continue"),
      onRaise: (budgetOverride) => this.session.send("continue", { budgetOverride }),
    });
    this.allowed = new AlwaysAllowed($(".approval-control"), (tool) => this.session.request("revoke_approval", { conversation_id: this.session.cid, tool }));
    $("#conversation").addEventListener("approval-decided", () => this.composer.focus());
  }

  /** The message input and its controls: what it sends goes to the session, its attachments to the tree. */
  #buildComposer() {
    return new Composer(
      {
        form: $("#composer"), input: $("#message-input"), send: $("#send-button"), stop: $("#stop-button"),
        mode: $("#mode-switch"), approval: $("#approval-select"), agent: $("#agent-control"),
        commandMenu: $("#command-menu"), error: $("#composer-error"), queue: $("#queued-messages"),
        tray: $("#attachment-tray"), attach: $("#attach-button"), attachInput: $("#attach-input"), dropZone: $(".main"),
      },
      {
        onSend: (text, options) => {
          this.followup.clear();
          return this.session.send(text, options);
        },
        onStop: () => this.session.cancel(),
        commands: () => pageCommands({
          session: this.session, chat: this.chat, statusBar: this.statusBar, memory: this.memory, newButton: $("#new-conversation"),
        }),
        attachments: {
          token: this.token,
          limit: Number(document.body.dataset.uploadLimit) || 0,
          onUploaded: (answer) => {
            this.tree.apply([{ event: "created", path: answer.path, is_dir: false, dest_path: null }]);
            this.tree.reveal(answer.path);
          },
        },
      },
    );
  }

  /** Text for the agent put after what the message box holds, not sent.
   * @param {string} text */
  #toComposer(text) {
    const typed = $("#message-input").value.trimEnd();
    this.composer.fill(typed ? `${typed}\n\n${text}` : text);
  }

  #setTitle(title) {
    $("#conversation-title").textContent = title || "New conversation";
    this.attention.setBase(title);
  }

  /** Send the last message again, where it was sent: a new version of it, as an unchanged edit makes. */
  async #retry() {
    await this.session.refreshed(); // a task stopped a moment ago: its message is read with its end
    const record = lastUserRecord(this.session.index, this.session.viewLeaf);
    if (record) this.session.edit(record, record.content ?? "");
    else this.composer.showError("There is no message to send again yet: wait a moment and retry.");
  }

  /** The tools always allowed in the open conversation. */
  async #loadAllowed(cid) {
    this.allowed.set([]);
    if (!cid) return;
    const status = await this.conn.request("get_status", { conversation_id: cid });
    if (status.ok && this.session.cid === cid) this.allowed.set(status.always_allowed);
  }

  /** Apply / Discard a proposed edit, undo a task: the ack (errors as acks), the file tree kept current. */
  #safetyHandlers() {
    return { // each called once this.session is made (after the chat view)
      /** @param {string} proposalId */
      onApplyEdit: async (proposalId) => {
        const ack = await this.session.request("apply_edit", { conversation_id: this.session.cid, proposal_id: proposalId });
        if (ack.ok && ack.change) this.tree.apply([{ ...ack.change, dest_path: null }]);
        return ack;
      },
      /** @param {string} proposalId */
      onDiscardEdit: (proposalId) => this.session.request("discard_edit", { conversation_id: this.session.cid, proposal_id: proposalId }),
      /** @param {string} messageId */
      confirmUndo: (messageId) => this.session.confirmUndo(messageId),
      /** @param {string} messageId
       * @param {string[]} overwrite */
      onUndo: (messageId, overwrite) => this.session.undo(messageId, overwrite),
    };
  }

  #bindControls() {
    $("#new-conversation").addEventListener("click", () => {
      this.session.newConversation();
      this.composer.focus();
    });
    $("#refresh-tree").addEventListener("click", () => this.tree.reload());
    document.addEventListener("workspace:open", (/** @type {CustomEvent<{path?: string, line?: number}>} */ event) => {
      const { path, line } = event.detail ?? {};
      if (path) this.#show(path, line);
    });
    $("#file-preview [data-role=edit]").addEventListener("click", () => this.#edit(this.preview.path));
    $("#status-bar [data-role=api]").addEventListener("click", () => this.settings.open());
    $("#reconnect-banner [data-role=retry]").addEventListener("click", () => this.conn.reconnect());
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      if (this.composer.running) this.session.cancel();
      else if (this.preview.isOpen) this.preview.close();
    });
  }

  /** A file picked in the tree or a link: in the editor while it is open, else in the preview.
   * @param {string} path
   * @param {number | null} [line] */
  async #show(path, line = null) {
    if (this.editor.isOpen) {
      if (await this.editor.open(path)) this.tree.select(path);
      return;
    }
    this.tree.select(path);
    this.preview.open(path, { line });
  }

  /** Edit the previewed file: the editor takes the preview's place.
   * @param {string | null} path */
  #edit(path) {
    if (!path) return;
    this.preview.close();
    this.tree.select(path);
    this.editor.open(path);
  }

  /** After demo_reset: a new conversation, the list and the tree as the server has them. */
  #startedOver() {
    this.composer.clearQueue();
    this.session.newConversation();
    this.conversations.refresh();
    this.tree.reload();
    this.chat.showNotice("Started over: the sample workspace is back and this demo's conversations are gone.", "info");
  }

  #onOpen(cid) {
    if (cid !== this.openCid && this.openCid !== null) this.composer.clearQueue();
    if (cid !== this.openCid) {
      this.#loadAllowed(cid);
      this.processes.show(cid);
      this.changes.show(cid);
      this.terminals.show(cid);
    }
    this.openCid = cid;
    this.statusBar.setCompactable(Boolean(cid));
    rememberConversation(cid);
    this.conversations.setActive(cid);
    this.#setTitle(cid ? this.conversations.titleOf(cid) ?? "Conversation" : null);
    this.composer.hideError();
  }

  #onConnectionState(state, detail) {
    const banner = $("#reconnect-banner");
    this.statusBar.setConnection(state);
    banner.dataset.state = state;
    if (state === "connected") {
      banner.hidden = true;
      this.loadStatus();
      this.conversations.refresh();
      this.tree.reload();
      if (!detail.first) {
        this.session.resync();
        this.processes.show(this.session.cid); // the events it missed meanwhile are not replayed to it
        this.terminals.show(this.session.cid); // attached anew: a new connection follows no terminal
      }
      else if (this.initialConversation) this.session.open(this.initialConversation);
      return;
    }
    banner.hidden = false;
    const why = state === "refused" && detail.code === "wrong_token" ? "wrong_token" : state;
    banner.dataset.reason = why;
    banner.querySelector("[data-role=retry]").hidden = state === "reconnecting" || why === "wrong_token"; // a retry sends the same token
    const lost = this.conn?.connectedOnce ? "Connection lost. Reconnecting…" : "Cannot reach the server. Retrying…";
    banner.querySelector("[data-role=text]").textContent = BANNER_TEXT[why] ?? lost;
  }
}

new App(document.body.dataset.token ?? "");
