// The message input: Enter sends, Shift+Enter adds a line, Esc stops; mode and approval controls.
const MAX_INPUT_HEIGHT = 240;

export class Composer {
  /** els: {form, input, send, stop, mode, approval, error}; handlers: {onSend(text), onStop()}. */
  constructor(els, { onSend, onStop }) {
    this.els = els;
    this.onSend = onSend;
    this.onStop = onStop;
    this.running = false;
    this.touched = { mode: false, approval: false };
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
    this.#update();
  }

  get mode() {
    return this.els.mode.checked ? "thinking" : "fast";
  }

  get approval() {
    return this.els.approval.value;
  }

  /** Server defaults from get_status, unless the user already chose. */
  setDefaults({ mode, approval }) {
    if (mode && !this.touched.mode) this.els.mode.checked = mode === "thinking";
    if (approval && !this.touched.approval && [...this.els.approval.options].some((o) => o.value === approval)) {
      this.els.approval.value = approval;
    }
    this.#updateModeLabel();
  }

  setRunning(running) {
    this.running = running;
    this.els.stop.hidden = !running;
    this.els.form.classList.toggle("running", running);
  }

  submit() {
    const text = this.els.input.value.trim();
    if (!text) return;
    this.hideError();
    this.els.input.value = "";
    this.#update();
    this.onSend(text);
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
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, MAX_INPUT_HEIGHT)}px`;
    this.els.send.disabled = !input.value.trim();
  }

  #updateModeLabel() {
    this.els.mode.closest(".mode-toggle")?.setAttribute("data-mode", this.mode);
  }
}
