// @ts-check
// The agent picker of the composer: a button naming the agent of the next message, and a list that shows each
// agent's name, kind and description. ↑/↓/Home/End move, Enter/Space pick, Esc closes, a letter jumps to a name.
import { h, icon } from "./dom.js";

/** @typedef {{name: string, description?: string, mode?: string, agents?: string[]}} AgentSummary */
/** @typedef {{path: string, message: string}} AgentProblem a definition that did not load, and why */

/** What kind of agent it is, in a word, and what that means.
 * @param {AgentSummary} agent */
export function agentKind(agent) {
  if (agent.mode === "plan_execute") return { badge: "plans first", detail: "Makes a plan, then works through it step by step." };
  if (agent.agents?.length) return { badge: "delegates", detail: `Hands parts of the task to ${agent.agents.join(", ")}.` };
  return { badge: "works directly", detail: "" };
}

export class AgentPicker {
  /** root: the .agent-control holding the button and the list; a `change` event is dispatched on it when the user
   * picks an agent.
   * @param {HTMLElement} root */
  constructor(root) {
    this.root = root;
    this.button = /** @type {HTMLButtonElement} */ (root.querySelector("[data-role=button]"));
    this.label = /** @type {HTMLElement} */ (root.querySelector("[data-role=name]"));
    this.list = /** @type {HTMLElement} */ (root.querySelector("[data-role=list]"));
    /** @type {AgentSummary[]} */
    this.agents = [];
    /** @type {string | null} */
    this.value = null;
    this.active = -1;
    this.button.addEventListener("click", () => (this.isOpen ? this.close() : this.open()));
    this.button.addEventListener("keydown", (event) => {
      if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
      event.preventDefault();
      this.open();
    });
    this.list.addEventListener("keydown", (event) => this.#onKey(event));
    this.list.addEventListener("focusout", (event) => {
      if (!root.contains(/** @type {Node | null} */ (event.relatedTarget))) this.close();
    });
    document.addEventListener("mousedown", (event) => {
      if (this.isOpen && !root.contains(/** @type {Node} */ (event.target))) this.close();
    });
  }

  get isOpen() {
    return !this.list.hidden;
  }

  /** The agents there are, and the one to show as chosen (one the list lacks shows as not found); after them the
   * definitions that did not load, each with why (none can be picked).
   * @param {AgentSummary[]} agents
   * @param {string | null} value
   * @param {AgentProblem[]} [problems] */
  set(agents, value, problems = []) {
    this.agents = agents;
    this.value = value;
    const missing = value && !agents.some((agent) => agent.name === value) ? [{ name: value, missing: true }] : [];
    const listed = [...agents, ...missing];
    this.list.replaceChildren(
      ...listed.map((agent, position) => this.#option(agent, position)),
      ...problems.map((problem, n) => this.#problem(problem, listed.length + n)),
    );
    this.root.hidden = !agents.length;
    this.root.dataset.value = value ?? "";
    const chosen = agents.find((agent) => agent.name === value);
    this.label.textContent = value ? (chosen ? value : `${value} (not found)`) : "—";
    this.button.title = chosen ? `Agent: ${chosen.name}. ${chosen.description ?? ""}` : value ? "This agent is not defined any more" : "";
    this.button.setAttribute("aria-label", `Agent: ${this.label.textContent}`);
  }

  /** Pick an agent as the user does (the `change` event follows).
   * @param {string} name */
  choose(name) {
    this.close();
    if (name === this.value || !this.agents.some((agent) => agent.name === name)) return;
    this.set(this.agents, name);
    this.root.dispatchEvent(new Event("change"));
  }

  open() {
    if (!this.agents.length) return;
    this.list.hidden = false;
    this.button.setAttribute("aria-expanded", "true");
    const options = this.#options();
    this.#activate(Math.max(0, options.findIndex((option) => option.dataset.agent === this.value)));
    this.list.focus();
  }

  close() {
    if (!this.isOpen) return;
    const hadFocus = this.root.contains(document.activeElement);
    this.list.hidden = true;
    this.button.setAttribute("aria-expanded", "false");
    if (hadFocus) this.button.focus();
  }

  #options() {
    return /** @type {HTMLElement[]} */ ([...this.list.querySelectorAll("[role=option]")]);
  }

  /** @param {number} position */
  #activate(position) {
    const options = this.#options();
    this.active = position;
    options.forEach((option, n) => option.classList.toggle("active", n === position));
    const el = options[position];
    if (!el) return;
    this.list.setAttribute("aria-activedescendant", el.id);
    el.scrollIntoView({ block: "nearest" });
  }

  /** @param {KeyboardEvent} event */
  #onKey(event) {
    const options = this.#options();
    const last = options.length - 1;
    const moves = { ArrowDown: Math.min(last, this.active + 1), ArrowUp: Math.max(0, this.active - 1), Home: 0, End: last };
    if (event.key in moves) {
      this.#activate(moves[event.key]);
    } else if (event.key === "Enter" || event.key === " ") {
      const name = options[this.active]?.dataset.agent;
      if (name) this.choose(name);
    } else if (event.key === "Escape") {
      this.close();
    } else if (event.key === "Tab") {
      this.close();
      return;
    } else if (event.key.length === 1 && /\S/.test(event.key)) {
      const letter = event.key.toLowerCase();
      const found = options.findIndex((option, n) => n > this.active && option.dataset.agent?.startsWith(letter));
      const wrapped = found >= 0 ? found : options.findIndex((option) => option.dataset.agent?.startsWith(letter));
      if (wrapped >= 0) this.#activate(wrapped);
    } else {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
  }

  /** @param {AgentProblem} problem
   * @param {number} position */
  #problem(problem, position) {
    return h(
      "li",
      {
        id: `agent-option-${position}`, class: "agent-option problem", role: "option", "aria-selected": "false",
        "aria-disabled": "true", "data-testid": "agent-problem",
      },
      h("span", { class: "agent-option-head" },
        h("span", { class: "agent-option-name", text: problem.path.split("/").pop() || problem.path }),
        h("span", { class: "agent-kind", text: "not loaded" })),
      h("span", { class: "agent-option-description", text: problem.message }),
    );
  }

  /** @param {AgentSummary & {missing?: boolean}} agent
   * @param {number} position */
  #option(agent, position) {
    const kind = agent.missing ? { badge: "not found", detail: "" } : agentKind(agent);
    const description = agent.missing ? "This agent is not defined any more: pick another one." : agent.description ?? "";
    const el = h(
      "li",
      {
        id: `agent-option-${position}`, class: `agent-option${agent.missing ? " missing" : ""}`, role: "option",
        "aria-selected": String(agent.name === this.value), "aria-disabled": agent.missing ? "true" : null,
        "data-agent": agent.name, "data-testid": "agent-option",
      },
      h("span", { class: "agent-option-head" },
        h("span", { class: "agent-option-name", text: agent.name }),
        h("span", { class: "agent-kind", text: kind.badge }),
        agent.name === this.value ? icon("check", "agent-current") : null),
      h("span", { class: "agent-option-description", text: [description, kind.detail].filter(Boolean).join(" ") }),
    );
    el.addEventListener("click", () => this.choose(agent.name));
    el.addEventListener("mousemove", () => { if (this.active !== position) this.#activate(position); });
    return el;
  }
}
