// Entry point of the main page: builds the parts and wires them to the connection.
import { ChatView } from "./chat.js";
import { Composer } from "./composer.js";
import { Connection } from "./connection.js";
import { ConversationList } from "./conversations.js";
import { FileTree } from "./filetree.js";
import { FilePreview } from "./preview.js";
import { Session } from "./session.js";
import { renderApiSetup } from "./setup.js";
import { StatusBar } from "./statusbar.js";

const $ = (selector) => document.querySelector(selector);
const BANNER_TEXT = {
  disconnected: "Disconnected by the server.",
  refused: "The server refused the connection. Open the address with the token that the server printed.",
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

function setTitle(title) {
  $("#conversation-title").textContent = title || "New conversation";
  document.title = title ? `${title} · Workspace Agent` : "Workspace Agent";
}

class App {
  constructor(token) {
    this.token = token;
    this.initialConversation = conversationFromUrl();
    rememberConversation(this.initialConversation);
    const request = (event, payload, timeoutMs) => this.conn.request(event, payload, timeoutMs);
    this.#buildSidebar(request);
    this.#buildMain(request);
    this.session = new Session({
      conn: { request },
      chat: this.chat,
      conversations: this.conversations,
      statusBar: this.statusBar,
      tree: this.tree,
      composer: this.composer,
      onOpen: (cid) => this.#onOpen(cid),
    });
    this.conn = new Connection({
      token,
      onEvent: (name, payload) => this.session.handleEvent(name, payload),
      onState: (state, detail) => this.#onConnectionState(state, detail),
    });
    this.#bindControls();
    this.chat.showWelcome();
    if (this.initialConversation) this.chat.showLoading();
    this.composer.focus();
  }

  #buildSidebar(request) {
    this.statusBar = new StatusBar($("#status-bar"));
    this.conversations = new ConversationList($("#conversation-list"), {
      load: () => request("list_conversations", {}),
      onSelect: (cid) => this.session.open(cid),
      onTitle: (title) => setTitle(title),
    });
    this.preview = new FilePreview($("#file-preview"), { token: this.token, onClose: () => this.tree.select(null) });
    this.tree = new FileTree($("#file-tree"), {
      load: () => request("get_file_tree", {}),
      onOpenFile: (path) => {
        this.tree.select(path);
        this.preview.open(path);
      },
      onRootName: (name) => { $("#workspace-name").textContent = name ?? ""; },
      onChange: (change) => this.preview.changed(change.path, change.event, change.dest_path),
    });
    this.loadStatus = async () => {
      const status = await request("get_status", {}).catch(() => null);
      if (!status?.ok) return;
      this.statusBar.setInfo(status);
      this.composer.setDefaults(status);
      renderApiSetup($("#api-setup-panel"), status, this.loadStatus);
    };
  }

  #buildMain(request) {
    this.chat = new ChatView($("#conversation"), $("#chat-scroll"), {
      onEdit: (record, text) => this.session.edit(record, text),
      onSwitch: (id) => this.session.switchBranch(id),
      onApprove: (callId, approved, always) => this.session.approve(callId, approved, always),
      onExample: (text) => this.composer.fill(text),
      ...this.#safetyHandlers(request),
    });
    const jump = $("#jump-latest");
    this.chat.onScrollState = (atBottom) => { jump.hidden = atBottom; };
    jump.addEventListener("click", () => this.chat.scrollToBottom());
    this.composer = new Composer(
      {
        form: $("#composer"), input: $("#message-input"), send: $("#send-button"), stop: $("#stop-button"),
        mode: $("#mode-switch"), approval: $("#approval-select"), agent: $("#agent-select"),
        skillMenu: $("#skill-menu"), error: $("#composer-error"),
      },
      { onSend: (text, options) => this.session.send(text, options), onStop: () => this.session.cancel() },
    );
  }

  /** Apply / Discard a proposed edit, undo a task: the ack (errors as acks), the file tree kept current. */
  #safetyHandlers(request) {
    const ask = (event, payload, timeoutMs) => request(event, { conversation_id: this.session.cid, ...payload }, timeoutMs)
      .catch((error) => ({ ok: false, error: { code: "timeout", message: error?.message ?? String(error) } }));
    return {
      onApplyEdit: async (proposalId) => {
        const ack = await ask("apply_edit", { proposal_id: proposalId });
        if (ack?.ok && ack.change) this.tree.apply([ack.change]);
        return ack;
      },
      onDiscardEdit: (proposalId) => ask("discard_edit", { proposal_id: proposalId }),
      onUndo: async (messageId) => {
        const ack = await ask("undo_task", { message_id: messageId }, 30_000);
        if (ack?.ok) this.tree.refresh();
        return ack;
      },
    };
  }

  #bindControls() {
    $("#new-conversation").addEventListener("click", () => {
      this.session.newConversation();
      this.composer.focus();
    });
    $("#refresh-tree").addEventListener("click", () => this.tree.reload());
    $("#status-bar [data-role=api]").addEventListener("click", () => $("#api-setup-panel").scrollIntoView({ behavior: "smooth" }));
    $("#reconnect-banner [data-role=retry]").addEventListener("click", () => this.conn.reconnect());
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      if (this.composer.running) this.session.cancel();
      else if (this.preview.isOpen) this.preview.close();
    });
  }

  #onOpen(cid) {
    rememberConversation(cid);
    this.conversations.setActive(cid);
    setTitle(cid ? this.conversations.titleOf(cid) ?? "Conversation" : null);
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
      if (!detail.first) this.session.resync();
      else if (this.initialConversation) this.session.open(this.initialConversation);
      return;
    }
    banner.hidden = false;
    banner.querySelector("[data-role=retry]").hidden = state === "reconnecting";
    const lost = this.conn?.connectedOnce ? "Connection lost. Reconnecting…" : "Cannot reach the server. Retrying…";
    banner.querySelector("[data-role=text]").textContent = BANNER_TEXT[state] ?? lost;
  }
}

new App(document.body.dataset.token ?? "");
