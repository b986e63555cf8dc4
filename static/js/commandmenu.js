// @ts-check
// The command menu of the message box. `/` at the start opens it: the commands, filtered as the name is typed;
// `/skill ` and `/agent ` then offer the skills and the agents. ↑/↓ move, Enter/Tab pick, Esc closes; the
// mouse picks too. Every command runs what the page's own button for it runs.
import { h } from "./dom.js";

/**
 * @typedef {object} MenuChoice  a second-level line (a skill, an agent)
 * @property {string} name
 * @property {string} description
 * @property {string} [badge]  a word beside the name (an agent's kind)
 * @property {string | null} [disabled]  why it cannot be picked
 */
/**
 * @typedef {object} Command
 * @property {string} name
 * @property {string} description
 * @property {string[]} [aliases]  other names it is found by as one types (compact: condense)
 * @property {() => string | null} [unavailable]  why it cannot run now (null: it can)
 * @property {() => MenuChoice[]} [choices]  what follows its name (`/skill NAME`, `/agent NAME`)
 * @property {boolean} [completes]  a choice is written into the message (`/skill NAME ` + text), not run
 * @property {(choice?: string) => void} [run]
 */
/** @typedef {{el: HTMLElement, name: string, disabled: boolean, pick: () => void}} Line */

const COMMAND_WORD = /^\/(\S*)$/; // the text up to the caret, while the command's name is typed
const CHOICE_WORD = /^\/(\S+) (\S*)$/; // ... while the name of its choice is typed
const TYPED_COMMAND = /^\/(\S+)(?:\s+(\S+))?\s*$/; // a whole message that is a command

/** `/skill NAME rest` -> {skill, text}; null for any other text (or no name yet).
 * @param {string} text */
export function parseSkill(text) {
  const match = /^\/skill\s+(\S+)\s*([\s\S]*)$/.exec(text);
  if (!match) return null;
  return { skill: match[1], text: match[2].trim() || `Follow the ${match[1]} skill.` };
}

export class CommandMenu {
  /** input: the textarea; list: the <ul> under it; commands() -> the commands; onChange(): the text was changed;
   * onError(message): a typed command could not run.
   * @param {HTMLTextAreaElement} input
   * @param {HTMLElement} list
   * @param {{commands: () => Command[], onChange?: () => void, onError?: (message: string) => void}} options */
  constructor(input, list, options) {
    this.input = input;
    this.list = list;
    this.options = options;
    /** @type {Line[]} */
    this.lines = [];
    this.active = -1;
    this.dismissed = /** @type {string | null} */ (null);
    input.addEventListener("blur", () => this.close());
    input.addEventListener("click", () => this.update());
  }

  get isOpen() {
    return !this.list.hidden;
  }

  /** @param {string} name */
  #command(name) {
    const wanted = name.toLowerCase();
    return this.options.commands().find((command) => command.name === wanted) ?? null;
  }

  /** Open, filter or close the menu for the text before the caret. */
  update() {
    const value = this.input.value;
    const before = value.slice(0, this.input.selectionStart ?? value.length);
    if (!before.startsWith("/") || value === this.dismissed) return this.close();
    this.dismissed = null;
    const naming = COMMAND_WORD.exec(before);
    const choosing = naming ? null : CHOICE_WORD.exec(before);
    const command = choosing ? this.#command(choosing[1]) : null;
    const lines = naming ? this.#commandLines(naming[1].toLowerCase())
      : command?.choices ? this.#choiceLines(command, choosing?.[2].toLowerCase() ?? "") : [];
    if (!lines.length) return this.close();
    const previous = this.lines[this.active]?.name;
    this.lines = lines;
    this.list.replaceChildren(...lines.map((line) => line.el));
    this.list.setAttribute("aria-label", command ? `${command.name}: ${command.description}` : "Commands");
    const again = lines.findIndex((line) => line.name === previous && !line.disabled);
    this.#activate(again >= 0 ? again : lines.findIndex((line) => !line.disabled));
    this.list.hidden = false;
    this.input.setAttribute("aria-expanded", "true");
    return undefined;
  }

  close() {
    this.list.hidden = true;
    this.list.replaceChildren();
    this.lines = [];
    this.active = -1;
    this.input.setAttribute("aria-expanded", "false");
    this.input.removeAttribute("aria-activedescendant");
  }

  /** Handle a key while the menu is open; true when the key was used.
   * @param {KeyboardEvent} event */
  handleKey(event) {
    if (!this.isOpen) return false;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      this.#move(event.key === "ArrowDown" ? 1 : -1);
    } else if ((event.key === "Enter" || event.key === "Tab") && !event.shiftKey && !event.isComposing) {
      this.lines[this.active]?.pick(); // none can be picked now (each says why): nothing is sent either
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

  /** A message that is a command (`/new`, `/agent coder`, ...) runs instead of being sent; true when it was one.
   * `/skill` is not: it sends its message (parseSkill). Anything else starting with `/` is a message.
   * @param {string} text */
  runTyped(text) {
    const match = TYPED_COMMAND.exec(text);
    const command = match ? this.#command(match[1]) : null;
    if (!match || !command || command.completes) return false;
    const [, , choice] = match;
    const why = command.unavailable?.();
    if (why) {
      this.options.onError?.(why);
      return true;
    }
    if (command.choices && !choice) {
      this.options.onError?.(`Name one: /${command.name} NAME (type /${command.name} and a space to see them).`);
      return true;
    }
    const found = choice ? command.choices?.().find((option) => option.name === choice) : null;
    if (choice && (!found || found.disabled)) {
      this.options.onError?.(found?.disabled ?? `There is no ${command.name} “${choice}”.`);
      return true;
    }
    this.#finish("");
    command.run?.(choice);
    return true;
  }

  /** @param {string} typed */
  #commandLines(typed) {
    const matches = (/** @type {string} */ name) => name.startsWith(typed);
    return this.options.commands()
      .filter((command) => matches(command.name) || command.aliases?.some(matches))
      .map((command, position) => {
        const why = command.unavailable?.() ?? null;
        return this.#line(position, { name: command.name, description: command.description, disabled: why },
          `/${command.name}${command.choices ? " …" : ""}`, () => this.#pickCommand(command));
      });
  }

  /** @param {Command} command
   * @param {string} typed */
  #choiceLines(command, typed) {
    return (command.choices?.() ?? [])
      .filter((choice) => choice.name.toLowerCase().startsWith(typed))
      .map((choice, position) => this.#line(position, choice, choice.name, () => this.#pickChoice(command, choice)));
  }

  /** @param {Command} command */
  #pickCommand(command) {
    if (command.choices) {
      this.#finish(`/${command.name} ${this.#rest()}`, `/${command.name} `.length);
      return;
    }
    this.#finish("");
    command.run?.();
  }

  /** @param {Command} command
   * @param {MenuChoice} choice */
  #pickChoice(command, choice) {
    if (choice.disabled) return;
    if (command.completes) {
      const head = `/${command.name} ${choice.name} `;
      this.#finish(head + this.#rest(), head.length);
      return;
    }
    this.#finish(this.#rest());
    command.run?.(choice.name);
  }

  /** What follows the word being typed (kept when a name is completed). */
  #rest() {
    return this.input.value.slice(this.input.selectionStart ?? this.input.value.length).replace(/^\S*\s*/, "");
  }

  /** Put text in the box, the caret at `caret` (the end when absent), and say so. */
  #finish(text, caret = text.length) {
    this.input.value = text;
    this.input.setSelectionRange(caret, caret);
    this.close();
    this.input.focus();
    this.options.onChange?.();
    this.update(); // `/skill ` opens the skills at once
  }

  /** @param {number} step */
  #move(step) {
    const count = this.lines.length;
    for (let n = 1; n <= count; n += 1) {
      const next = (((this.active + step * n) % count) + count) % count;
      if (!this.lines[next].disabled) return this.#activate(next);
    }
    return undefined;
  }

  /** @param {number} position */
  #activate(position) {
    this.active = position;
    this.lines.forEach((line, n) => line.el.setAttribute("aria-selected", String(n === position)));
    const el = this.lines[position]?.el;
    if (!el) return this.input.removeAttribute("aria-activedescendant");
    this.input.setAttribute("aria-activedescendant", el.id);
    el.scrollIntoView({ block: "nearest" });
    return undefined;
  }

  /** @param {number} position
   * @param {MenuChoice} item
   * @param {string} label
   * @param {() => void} pick
   * @returns {Line} */
  #line(position, item, label, pick) {
    const disabled = Boolean(item.disabled);
    const el = h(
      "li",
      {
        id: `command-option-${position}`, class: `command-option${disabled ? " disabled" : ""}`, role: "option",
        "aria-selected": "false", "aria-disabled": disabled ? "true" : null, "data-name": item.name,
        title: disabled ? `Not now: ${item.disabled}` : item.description,
      },
      h("span", { class: "command-name", text: label }),
      item.badge ? h("span", { class: "command-badge", text: item.badge }) : null,
      h("span", { class: "command-description", text: [item.description, item.disabled].filter(Boolean).join(" · ") }),
    );
    // mousedown, not click: the input keeps the focus (its blur would close the menu first).
    el.addEventListener("mousedown", (event) => {
      event.preventDefault();
      if (!disabled) pick();
    });
    return { el, name: item.name, disabled, pick };
  }
}
