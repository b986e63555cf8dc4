// Completion of skill names after `/skill ` in the message input: ↑/↓ move, Tab/Enter pick, Esc closes.
import { h } from "./dom.js";

const TYPING_NAME = /^\/skill (\S*)$/; // the text up to the caret, while the name is being typed

/** `/skill NAME rest` -> {skill, text}; null for any other text (or no name yet). */
export function parseSkill(text) {
  const match = /^\/skill\s+(\S+)\s*([\s\S]*)$/.exec(text);
  if (!match) return null;
  return { skill: match[1], text: match[2].trim() || `Follow the ${match[1]} skill.` };
}

export class SkillMenu {
  /** input: the textarea; list: the <ul> under it; onChange(): the input's text was completed. */
  constructor(input, list, { onChange }) {
    this.input = input;
    this.list = list;
    this.onChange = onChange;
    this.skills = [];
    this.items = [];
    this.active = -1;
    this.dismissed = null;
    input.addEventListener("blur", () => this.close());
    input.addEventListener("click", () => this.update());
  }

  get isOpen() {
    return !this.list.hidden;
  }

  /** get_status's skills: [{name, description, user_only} | {name, broken}]. */
  setSkills(skills) {
    this.skills = Array.isArray(skills) ? skills.filter((skill) => skill?.name) : [];
    if (this.isOpen) this.update();
  }

  /** Open, filter or close the list for the text before the caret. */
  update() {
    const before = this.input.value.slice(0, this.input.selectionStart ?? this.input.value.length);
    const match = TYPING_NAME.exec(before);
    if (!match || this.input.value === this.dismissed) return this.close();
    this.dismissed = null;
    const prefix = match[1].toLowerCase();
    const found = this.skills.filter((skill) => skill.name.toLowerCase().startsWith(prefix));
    if (!found.length) return this.close();
    const previous = this.items[this.active]?.skill.name;
    this.items = found.map((skill, position) => ({ skill, el: this.#item(skill, position) }));
    this.list.replaceChildren(...this.items.map((item) => item.el));
    const again = this.items.findIndex((item) => item.skill.name === previous && !item.skill.broken);
    this.#activate(again >= 0 ? again : this.items.findIndex((item) => !item.skill.broken));
    this.list.hidden = false;
    this.input.setAttribute("aria-expanded", "true");
    return undefined;
  }

  close() {
    this.list.hidden = true;
    this.list.replaceChildren();
    this.items = [];
    this.active = -1;
    this.input.setAttribute("aria-expanded", "false");
    this.input.removeAttribute("aria-activedescendant");
  }

  /** Handle a key while the list is open; true when the key was used. */
  handleKey(event) {
    if (!this.isOpen) return false;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      this.#move(event.key === "ArrowDown" ? 1 : -1);
    } else if ((event.key === "Enter" || event.key === "Tab") && !event.shiftKey && !event.isComposing) {
      if (this.active < 0) return false;
      this.pick(this.items[this.active].skill);
    } else if (event.key === "Escape") {
      this.dismissed = this.input.value;
      this.close();
    } else {
      return false;
    }
    event.preventDefault();
    event.stopPropagation();
    return true;
  }

  /** Put `/skill NAME ` in place of what was typed of the name; keep the rest of the text. */
  pick(skill) {
    if (!skill || skill.broken) return;
    const caret = this.input.selectionStart ?? this.input.value.length;
    const rest = this.input.value.slice(caret).replace(/^\S*\s*/, "");
    const head = `/skill ${skill.name} `;
    this.input.value = head + rest;
    this.input.setSelectionRange(head.length, head.length);
    this.close();
    this.input.focus();
    this.onChange?.();
  }

  #move(step) {
    const count = this.items.length;
    for (let n = 1; n <= count; n += 1) {
      const next = (((this.active + step * n) % count) + count) % count;
      if (!this.items[next].skill.broken) return this.#activate(next);
    }
    return undefined;
  }

  #activate(position) {
    this.active = position;
    this.items.forEach((item, n) => item.el.setAttribute("aria-selected", String(n === position)));
    const el = this.items[position]?.el;
    if (!el) return this.input.removeAttribute("aria-activedescendant");
    this.input.setAttribute("aria-activedescendant", el.id);
    el.scrollIntoView({ block: "nearest" });
    return undefined;
  }

  #item(skill, position) {
    const broken = Boolean(skill.broken);
    const el = h(
      "li",
      {
        id: `skill-option-${position}`, class: `skill-option${broken ? " broken" : ""}`, role: "option",
        "aria-selected": "false", "aria-disabled": broken ? "true" : null, "data-skill": skill.name,
        title: broken ? `Cannot be used: ${skill.broken}` : skill.description ?? "",
      },
      h("span", { class: "skill-name", text: skill.name }),
      h("span", { class: "skill-description", text: broken ? `broken: ${skill.broken}` : skill.description ?? "" }),
    );
    // mousedown, not click: the input keeps the focus (its blur would close the list first).
    el.addEventListener("mousedown", (event) => {
      event.preventDefault();
      this.pick(skill);
    });
    return el;
  }
}
