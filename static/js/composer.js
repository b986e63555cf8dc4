// @ts-check
// The message input: Enter sends, Shift+Enter adds a line, Esc stops; mode, approval and agent controls,
// and the command menu (`/`): `/skill NAME message`, `/agent NAME` and the page's other commands.
import { h, icon } from "./dom.js";
import { AgentPicker, agentKind } from "./agentpicker.js";
import { AttachmentTray } from "./attachments.js";
import { CommandMenu, parseSkill } from "./commandmenu.js";

const MAX_INPUT_HEIGHT = 240;
const FILES_ONLY_TEXT = "Look at the attached files.";

export class Composer {
  /** els: {form, input, send, stop, mode, approval, agent (the agent picker's root), commandMenu, error, queue,
   * tray, attach, attachInput, dropZone}; handlers: {onSend(text, {skill, typed, attachments}) -> Promise, onStop(),
   * commands() -> the page's commands besides /skill and /agent (commandmenu.js)}; attachments: {token, limit,
   * onUploaded(answer)} for the AttachmentTray. */
  constructor(els, { onSend, onStop, commands, attachments }) {
    this.els = els;
    this.onSend = onSend;
    this.onStop = onStop;
    this.running = false;
    this.sending = false; // a message is on its way (until the server's ack)
    this.queue = []; // messages typed while a task runs: sent, in order, when it ends
    this.sendLabel = h("span", { text: "Send" });
    for (const node of [...els.send.childNodes]) if (node.nodeType === Node.TEXT_NODE && node.textContent.trim()) node.replaceWith(this.sendLabel);
    this.touched = { mode: false, approval: false };
    this.defaultsKnown = false; // until get_status answers, the controls show the page's, not the server's, defaults
    this.agents = [];
    this.agentProblems = []; // definitions that did not load, with why
    this.defaultAgent = null;
    this.wantedAgent = null;
    this.skills = [];
    this.agentPicker = new AgentPicker(els.agent);
    this.menu = new CommandMenu(els.input, els.commandMenu, {
      commands: () => [this.#skillCommand(), this.#agentCommand(), ...(commands?.() ?? [])],
      onChange: () => this.#update(),
      onError: (message) => this.showError(message),
    });
    const trayEls = { tray: els.tray, button: els.attach, input: els.attachInput, dropZone: els.dropZone };
    this.tray = els.tray ? new AttachmentTray(trayEls, { ...attachments, onChange: () => this.#update() }) : null;
    els.input.addEventListener("paste", (event) => this.tray?.paste(event));
    els.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    els.input.addEventListener("keydown", (event) => this.#onKey(event));
    els.input.addEventListener("input", () => this.#update());
    els.stop.addEventListener("click", () => this.onStop());
    els.mode.addEventListener("change", () => {
      this.touched.mode = true;
      this.#updateModeLabel();
    });
    els.approval.addEventListener("change", () => { this.touched.approval = true; });
    els.agent.addEventListener("change", () => {
      this.wantedAgent = this.agentPicker.value; // kept when get_status answers again (a reconnection)
    });
    this.#update();
  }

  get mode() {
    return this.els.mode.checked ? "thinking" : "fast";
  }

  get approval() {
    return this.els.approval.value;
  }

  /** Mode and approval for send_message: left out while they are neither chosen nor the server's (the server's
   * own defaults then apply, not the page's placeholders).
   * @returns {{mode?: string, approval?: string}} */
  get choices() {
    /** @type {{mode?: string, approval?: string}} */
    const choices = {};
    if (this.defaultsKnown || this.touched.mode) choices.mode = this.mode;
    if (this.defaultsKnown || this.touched.approval) choices.approval = this.approval;
    return choices;
  }

  /** The agent picked for the next message (null until get_status listed the agents). */
  get agent() {
    return this.agents.length ? this.agentPicker.value : null;
  }

  /** Server defaults from get_status, unless the user already chose; the agents and skills there are.
   * @param {import("./requests.js").StatusFields} status */
  setDefaults({ mode, approval, agent, agents, agent_problems, skills }) {
    this.defaultsKnown = true;
    if (mode && !this.touched.mode) this.els.mode.checked = mode === "thinking";
    if (approval && !this.touched.approval && [...this.els.approval.options].some((o) => o.value === approval)) {
      this.els.approval.value = approval;
    }
    this.#updateModeLabel();
    if (Array.isArray(agents)) {
      this.agents = agents;
      this.agentProblems = Array.isArray(agent_problems) ? agent_problems : [];
      this.defaultAgent = agent ?? null;
      this.#fillAgents();
    }
    this.skills = Array.isArray(skills) ? skills.filter((skill) => skill?.name) : [];
    if (this.menu.isOpen) this.menu.update();
  }

  /** Pick the conversation's agent (null: the server's default, for a new conversation). */
  setAgent(name) {
    this.wantedAgent = name || null;
    this.#fillAgents();
  }

  #fillAgents() {
    const value = this.wantedAgent ?? this.defaultAgent ?? this.agents[0]?.name ?? null;
    this.agentPicker.set(this.agents, value, this.agentProblems);
  }

  /** `/skill NAME message`: the message is sent with that skill (get_status's skills; broken ones listed, not picked). */
  #skillCommand() {
    return {
      name: "skill", description: "Send the message with a skill's instructions", completes: true,
      unavailable: () => (this.skills.length ? null : "No skills are installed"),
      choices: () => this.skills.map((skill) => ({
        name: skill.name, description: skill.broken ? "" : skill.description ?? "",
        disabled: skill.broken ? `broken: ${skill.broken}` : null,
      })),
    };
  }

  /** `/agent NAME`: what picking that agent in the picker does. */
  #agentCommand() {
    return {
      name: "agent", description: "Switch the agent that answers in this conversation",
      unavailable: () => (this.agents.length ? null : "No agents are loaded yet"),
      choices: () => this.agents.map((agent) => ({ name: agent.name, description: agent.description ?? "", badge: agentKind(agent).badge })),
      run: (name) => this.agentPicker.choose(name),
    };
  }

  setRunning(running) {
    this.running = running;
    this.els.stop.hidden = !running;
    this.els.form.classList.toggle("running", running);
    this.#update();
    // After whatever else this change brings (opening another conversation drops the queue first).
    if (!running) queueMicrotask(() => this.#sendQueued());
  }

  /** Drop the queued messages (another conversation was opened); their text goes back into an empty input. */
  clearQueue() {
    if (!this.queue.length) return;
    if (!this.els.input.value.trim()) this.els.input.value = this.queue.map((item) => item.typed).join("\n\n");
    for (const item of this.queue) this.tray?.restore(item.options.attachments);
    this.queue = [];
    this.#renderQueue();
    this.#update();
  }

  #dispatch(text, options) {
    this.sending = true;
    this.#update();
    Promise.resolve(this.onSend(text, options)).then((ok) => {
      if (ok === false) this.tray?.restore(options.attachments); // back in the tray with the text
    }).finally(() => {
      this.sending = false;
      this.#update();
      if (!this.running) this.#sendQueued();
    });
  }

  #sendQueued() {
    if (this.running || this.sending || !this.queue.length) return;
    const next = this.queue.shift();
    this.#renderQueue();
    this.#dispatch(next.text, next.options);
  }

  #renderQueue() {
    const list = this.els.queue;
    if (!list) return;
    list.hidden = !this.queue.length;
    list.replaceChildren(...this.queue.map((item, position) => h(
      "li",
      { class: "queued-message", "data-testid": "queued-message" },
      h("span", { class: "queued-text" },
        h("span", { class: "queued-label", text: position ? "Queued · sent after the one above" : "Queued · sent when the agent finishes" }),
        item.typed),
      h("button", {
        type: "button", class: "btn-ghost btn-icon", "data-testid": "cancel-queued", "aria-label": "Cancel this queued message",
        title: "Cancel: it is not sent (its text goes back into an empty message box)", onclick: () => this.#unqueue(item),
      }, icon("close")),
    )));
  }

  #unqueue(item) {
    this.queue = this.queue.filter((other) => other !== item);
    this.tray?.restore(item.options.attachments);
    if (!this.els.input.value.trim()) this.fill(item.typed);
    this.#renderQueue();
  }

  submit() {
    const text = this.els.input.value.trim() || (this.tray?.hasFiles ? FILES_ONLY_TEXT : "");
    if (!text) return;
    if (this.tray?.busy) {
      this.showError("Wait until the files are uploaded (or remove them).");
      return;
    }
    const skill = parseSkill(text);
    if (!skill && /^\/skill\s*$/.test(text)) {
      this.showError("Name a skill: /skill NAME, then what to do.");
      return;
    }
    this.hideError();
    if (!this.tray?.hasFiles && this.menu.runTyped(text)) return;
    this.menu.close();
    this.els.input.value = "";
    const message = skill ? skill.text : text;
    /** @type {import("./sending.js").SendOptions} */
    const options = skill ? { skill: skill.skill, typed: text } : {};
    const attachments = this.tray?.take() ?? [];
    if (attachments.length) options.attachments = attachments;
    if (this.running || this.sending || this.queue.length) {
      this.queue.push({ text: message, options, typed: text });
      this.#renderQueue();
    } else {
      this.#dispatch(message, options);
    }
    this.#update();
  }

  /** Show why a message was refused; put its text back when the input is empty. */
  showError(message, text) {
    this.els.error.textContent = message;
    this.els.error.hidden = false;
    if (text && !this.els.input.value) {
      this.els.input.value = text;
      this.#update();
    }
  }

  hideError() {
    this.els.error.hidden = true;
  }

  fill(text) {
    this.els.input.value = text;
    this.#update();
    this.focus();
  }

  focus() {
    this.els.input.focus();
  }

  #onKey(event) {
    if (this.menu.handleKey(event)) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      this.submit();
    } else if (event.key === "Escape" && this.running) {
      event.preventDefault();
      event.stopPropagation();
      this.onStop();
    }
  }

  #update() {
    const input = this.els.input;
    this.menu.update();
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, MAX_INPUT_HEIGHT)}px`;
    const text = Boolean(input.value.trim()) || Boolean(this.tray?.hasFiles);
    const busy = this.running || this.sending || this.queue.length > 0;
    this.els.send.disabled = !text;
    this.sendLabel.textContent = text && busy ? "Queue" : "Send";
    this.els.send.title = !text ? (this.running ? "The agent is working: type a message to queue it, or stop the task" : "Type a message first")
      : busy ? "The agent is working: this message is sent when it finishes" : "Send (Enter)";
  }

  #updateModeLabel() {
    this.els.mode.closest(".mode-toggle")?.setAttribute("data-mode", this.mode);
  }
}
