// The message input: Enter sends, Shift+Enter adds a line, Esc stops; mode, approval and agent controls,
// and `/skill NAME message` with completion of the names.
import { h } from "./dom.js";
import { parseSkill, SkillMenu } from "./skillmenu.js";

const MAX_INPUT_HEIGHT = 240;

export class Composer {
  /** els: {form, input, send, stop, mode, approval, agent, skillMenu, error};
   * handlers: {onSend(text, {skill, typed}), onStop()}. */
  constructor(els, { onSend, onStop }) {
    this.els = els;
    this.onSend = onSend;
    this.onStop = onStop;
    this.running = false;
    this.touched = { mode: false, approval: false };
    this.agents = [];
    this.defaultAgent = null;
    this.wantedAgent = null;
    this.skillMenu = new SkillMenu(els.input, els.skillMenu, { onChange: () => this.#update() });
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
      this.wantedAgent = els.agent.value || null; // kept when get_status answers again (a reconnection)
      this.#describeAgent();
    });
    this.#update();
  }

  get mode() {
    return this.els.mode.checked ? "thinking" : "fast";
  }

  get approval() {
    return this.els.approval.value;
  }

  /** The agent picked for the next message (null until get_status listed the agents). */
  get agent() {
    return this.els.agent.value || null;
  }

  /** Server defaults from get_status, unless the user already chose; the agents and skills there are. */
  setDefaults({ mode, approval, agent, agents, skills }) {
    if (mode && !this.touched.mode) this.els.mode.checked = mode === "thinking";
    if (approval && !this.touched.approval && [...this.els.approval.options].some((o) => o.value === approval)) {
      this.els.approval.value = approval;
    }
    this.#updateModeLabel();
    if (Array.isArray(agents)) {
      this.agents = agents;
      this.defaultAgent = agent ?? null;
      this.#fillAgents();
    }
    this.skillMenu.setSkills(skills);
  }

  /** Pick the conversation's agent (null: the server's default, for a new conversation). */
  setAgent(name) {
    this.wantedAgent = name || null;
    this.#fillAgents();
  }

  #fillAgents() {
    const select = this.els.agent;
    const wanted = this.wantedAgent ?? this.defaultAgent;
    const options = this.agents.map((agent) => h("option", { value: agent.name, title: agent.description ?? "" }, agent.name));
    if (wanted && !this.agents.some((agent) => agent.name === wanted) && this.agents.length) {
      options.push(h("option", { value: wanted, title: "This agent is not defined any more" }, `${wanted} (not found)`));
    }
    select.replaceChildren(...options);
    if (wanted) select.value = wanted;
    select.closest(".agent-control").hidden = !this.agents.length;
    this.#describeAgent();
  }

  #describeAgent() {
    const chosen = this.agents.find((agent) => agent.name === this.els.agent.value);
    this.els.agent.title = chosen ? `${chosen.name}: ${chosen.description ?? ""}` : "";
  }

  setRunning(running) {
    this.running = running;
    this.els.stop.hidden = !running;
    this.els.form.classList.toggle("running", running);
  }

  submit() {
    const text = this.els.input.value.trim();
    if (!text) return;
    const skill = parseSkill(text);
    if (!skill && /^\/skill\s*$/.test(text)) {
      this.showError("Name a skill: /skill NAME, then what to do.");
      return;
    }
    this.hideError();
    this.skillMenu.close();
    this.els.input.value = "";
    this.#update();
    if (skill) this.onSend(skill.text, { skill: skill.skill, typed: text });
    else this.onSend(text, {});
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
    if (this.skillMenu.handleKey(event)) return;
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
    this.skillMenu.update();
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, MAX_INPUT_HEIGHT)}px`;
    this.els.send.disabled = !input.value.trim();
  }

  #updateModeLabel() {
    this.els.mode.closest(".mode-toggle")?.setAttribute("data-mode", this.mode);
  }
}
