// @ts-check
// The settings panel: the user's own settings (provider, base URL, models, API key, mode, approval, budgets, prices),
// read with get_settings and saved with set_settings into the server's settings file, used from the next task on.
// A value this run's environment (or a flag) sets is shown as fixed and cannot be changed here. The key is
// write-only: the page only ever learns whether one is set, and where.
import { h } from "./dom.js";

const SOURCE_TEXT = {
  default: "Default",
  "settings file": "Saved here",
  environment: "Fixed by the environment of this run",
  "command line": "Fixed by a command-line flag of this run",
  ".env": "From .env next to the server",
  "config.yaml": "From config.yaml next to the server",
};
const CHOICES = {
  mode: [["fast", "Fast"], ["thinking", "Thinking"]],
  approval: [["ask", "Ask before commands and deletions"], ["auto", "Auto (config changes ask)"], ["read-only", "Read-only"]],
};
const BUDGET_HINT = "none; e.g. $0.50, 3 CNY or 200k tokens";
/** Each section's title and rows: [name, label, what the placeholder says when the setting is unset].
 * @type {Array<[string, Array<[string, string, string]>]>} */
const SECTIONS = [
  ["Model", [
    ["provider", "Provider", ""],
    ["base_url", "Base URL", "the provider's"],
    ["model", "Model", "the provider's default"],
    ["thinking_model", "Thinking model", "the same model, thinking switched on"],
    ["api_key", "API key", ""],
  ]],
  ["New conversations", [["mode", "Mode", ""], ["approval", "Approval", ""]]],
  ["Budgets", [
    ["budget_task", "Per task", BUDGET_HINT],
    ["budget_conversation", "Per conversation", BUDGET_HINT],
    ["budget_day", "Per day", BUDGET_HINT],
  ]],
  ["Prices", [["prices", "Prices per million tokens", '{"MODEL": {"input": 0.3, "output": 1.2, "currency": "USD"}}']]],
];

/** What a setting's value reads as in its control. */
function shown(name, value) {
  if (value === null || value === undefined) return "";
  if (name === "prices") return Object.keys(value).length ? JSON.stringify(value, null, 2) : "";
  if (typeof value === "object") return `${value.amount} ${value.unit}`;
  return String(value);
}

export class SettingsPanel {
  /** onSaved(view): after a change was saved and applied.
   * @param {{request: import("./requests.js").Request, onSaved: (view: any) => void}} parts */
  constructor({ request, onSaved }) {
    this.request = request;
    this.onSaved = onSaved;
    /** @type {Map<string, {control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, initial: string, error: HTMLElement}>} */
    this.fields = new Map();
    this.view = null;
    this.body = h("div", { class: "settings-body" });
    this.state = h("span", { class: "settings-state", role: "status", "data-testid": "settings-state" });
    this.save = h("button", { type: "submit", class: "btn btn-primary", "data-testid": "settings-save" }, "Save");
    this.form = h("form", { class: "settings-form", novalidate: true, onsubmit: (event) => { event.preventDefault(); this.#save(); } },
      this.body,
      h("div", { class: "settings-actions" }, this.state,
        h("button", { type: "button", class: "btn", "data-testid": "settings-close", onclick: () => this.dialog.close() }, "Close"),
        this.save));
    this.dialog = h("dialog", { class: "settings-panel", "data-testid": "settings-panel", "aria-labelledby": "settings-title" },
      h("header", { class: "settings-head" }, h("h2", { id: "settings-title", text: "Settings" })),
      h("p", { class: "settings-intro", "data-role": "intro" }),
      this.form);
    document.body.append(this.dialog);
  }

  /** Show the panel with the server's settings as they are now. */
  async open() {
    this.body.replaceChildren(h("p", { class: "hint", text: "Loading…" }));
    this.#say("", "");
    if (!this.dialog.open) this.dialog.showModal();
    const ack = await this.request("get_settings", {});
    if (!ack.ok) {
      this.body.replaceChildren(h("p", { class: "settings-error", text: `Could not load the settings: ${ack.error?.message ?? "unknown error"}` }));
      return;
    }
    this.#render(ack);
    const first = /** @type {HTMLElement | null} */ (this.body.querySelector("input:not([disabled]), select:not([disabled])"));
    first?.focus();
  }

  get isOpen() {
    return this.dialog.open;
  }

  #render(view) {
    this.view = view;
    this.fields.clear();
    this.dialog.querySelector("[data-role=intro]").textContent = `Saved in ${view.path} (readable by you alone); the next task uses them, no restart needed. `
      + "A setting fixed by the environment of this run stays as it is until it is unset there.";
    this.body.replaceChildren(...SECTIONS.map(([title, rows]) => h("fieldset", { class: "settings-section" },
      h("legend", { text: title }),
      ...rows.map(([name, label, unset]) => this.#row(name, label, unset)))));
    this.#placeholders();
  }

  #row(name, label, unset) {
    const entry = this.view.settings[name];
    const control = this.#control(name, entry, unset);
    control.id = `setting-${name}`;
    control.setAttribute("data-testid", `settings-${name}`);
    control.disabled = entry.fixed;
    const error = h("div", { class: "settings-error", "data-testid": `settings-${name}-error`, role: "alert", hidden: true });
    this.fields.set(name, { control, initial: name === "api_key" ? "" : control.value, error });
    return h("div", { class: `settings-row${entry.fixed ? " fixed" : ""}`, "data-setting": name },
      h("label", { for: control.id, text: label }),
      control,
      h("div", { class: "settings-source", "data-testid": `settings-${name}-source` }, this.#source(name, entry)),
      error);
  }

  #control(name, entry, unset) {
    if (name === "provider") {
      const select = h("select", { onchange: () => this.#placeholders() },
        ...this.view.providers.map((p) => h("option", { value: p.name, text: p.name })));
      select.value = entry.value;
      return select;
    }
    if (CHOICES[name]) {
      const select = h("select", {}, ...CHOICES[name].map(([value, text]) => h("option", { value, text })));
      select.value = entry.value;
      return select;
    }
    if (name === "api_key") {
      return h("input", { type: "password", autocomplete: "new-password", spellcheck: "false",
        placeholder: entry.set ? "set: type a new one to replace it" : "not set" });
    }
    if (name === "prices") {
      const area = h("textarea", { rows: 3, spellcheck: "false", placeholder: unset });
      area.value = shown(name, entry.value);
      return area;
    }
    const input = h("input", { type: "text", spellcheck: "false", autocomplete: "off", placeholder: unset });
    input.value = shown(name, entry.value);
    return input;
  }

  /** Where the value comes from; for the key whether one is set, and a way to forget a saved one. */
  #source(name, entry) {
    const where = SOURCE_TEXT[entry.source] ?? entry.source;
    const fixed = entry.fixed ? ` (${entry.variable})` : "";
    if (name !== "api_key") return `${where}${fixed}`;
    const state = h("span", { "data-testid": "settings-key-state", text: entry.set ? `Set · ${where}${fixed}` : "Not set" });
    if (entry.source !== "settings file" || entry.fixed) return state;
    return h("span", {}, state, " ", h("button", {
      type: "button", class: "btn-link", "data-testid": "settings-key-remove", onclick: () => this.#save({ api_key: null }),
    }, "Remove the saved key"));
  }

  /** The chosen provider's own base URL and model, shown where the setting is unset. */
  #placeholders() {
    const provider = this.fields.get("provider")?.control.value;
    const preset = this.view.providers.find((p) => p.name === provider);
    if (!preset) return;
    const baseUrl = this.fields.get("base_url").control;
    const model = this.fields.get("model").control;
    baseUrl.setAttribute("placeholder", preset.base_url ?? "needed: the server's URL, e.g. http://localhost:11434/v1");
    model.setAttribute("placeholder", preset.model ?? "needed: the model's name");
    const key = this.fields.get("api_key").control;
    if (!this.view.settings.api_key.set) key.setAttribute("placeholder", preset.key_env ? "not set" : "none needed");
  }

  /** What changed since the panel was drawn; null when a value cannot be read (its error shown). */
  #changes() {
    /** @type {Record<string, any>} */
    const changes = {};
    for (const [name, { control, initial, error }] of this.fields) {
      error.hidden = true;
      if (control.disabled || control.value === initial) continue;
      if (name === "prices" && control.value.trim()) {
        try {
          changes.prices = JSON.parse(control.value);
        } catch (exc) {
          this.#fieldError(name, `not JSON: ${exc.message}`);
          return null;
        }
        continue;
      }
      changes[name] = control.value.trim() || null;
    }
    return changes;
  }

  /** Save what changed (or `given`); refusals shown at their settings, nothing saved then. */
  async #save(given = null) {
    const changes = given ?? this.#changes();
    if (!changes) return;
    if (!Object.keys(changes).length) {
      this.#say("Nothing changed.", "");
      return;
    }
    this.save.disabled = true;
    this.#say("Saving…", "");
    const ack = await this.request("set_settings", { settings: changes });
    this.save.disabled = false;
    if (!ack.ok) {
      const fields = ack.error?.fields ?? {};
      for (const [name, message] of Object.entries(fields)) this.#fieldError(name, String(message));
      this.#say(Object.keys(fields).length ? "Not saved: see the settings marked below." : `Not saved: ${ack.error?.message ?? "unknown error"}`, "error");
      return;
    }
    this.#render(ack);
    this.#say("Saved. The next task uses these settings.", "ok");
    this.onSaved(ack);
  }

  #fieldError(name, message) {
    const field = this.fields.get(name);
    if (!field) return;
    field.error.textContent = message;
    field.error.hidden = false;
  }

  #say(text, kind) {
    this.state.textContent = text;
    this.state.className = `settings-state${kind ? ` ${kind}` : ""}`;
  }
}
