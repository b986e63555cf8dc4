// @ts-check
// Files for the next message: the attach button, drag-and-drop and paste; each one uploads at once
// (POST /api/upload, with a progress bar) and shows as a chip until the message goes.
import { formatBytes, h, icon } from "./dom.js";
import { attachmentPicture } from "./thumbnail.js";

export class AttachmentTray {
  /** els: {tray, button, input, dropZone}; token: the access token; limit: the upload limit in bytes;
   * onUploaded(answer): a file was stored in the workspace; onChange(): the tray changed. */
  constructor(els, options) {
    this.els = els;
    this.options = options;
    this.items = [];
    els.button.addEventListener("click", () => els.input.click());
    els.input.addEventListener("change", () => {
      this.add(els.input.files);
      els.input.value = "";
    });
    this.#bindDrop(els.dropZone);
  }

  /** Whether files are uploading (a message waits for them). */
  get busy() {
    return this.items.some((item) => item.state === "uploading");
  }

  /** Whether uploaded files wait to go with the next message. */
  get hasFiles() {
    return this.items.some((item) => item.state === "ready");
  }

  /** The uploaded files' workspace paths, for send_message; the tray empties. */
  take() {
    const ready = this.items.filter((item) => item.state === "ready");
    for (const item of ready) this.#remove(item);
    return ready.map((item) => item.answer);
  }

  /** Put back the files of a message that was not accepted. */
  restore(answers) {
    for (const answer of answers ?? []) this.#append({ state: "ready", answer, name: answer.name, size: answer.size });
    this.#changed();
  }

  add(files) {
    for (const file of files ?? []) this.#upload(file);
  }

  /** Paste: files on the clipboard are attached rather than pasted as text. */
  paste(event) {
    const files = [...(event.clipboardData?.files ?? [])];
    if (!files.length) return;
    event.preventDefault();
    this.add(files);
  }

  #bindDrop(zone) {
    let depth = 0;
    const hasFiles = (event) => [...(event.dataTransfer?.types ?? [])].includes("Files");
    zone.addEventListener("dragenter", (event) => {
      if (!hasFiles(event)) return;
      depth += 1;
      zone.classList.add("dropping");
    });
    zone.addEventListener("dragleave", () => {
      depth = Math.max(0, depth - 1);
      if (!depth) zone.classList.remove("dropping");
    });
    zone.addEventListener("dragover", (event) => {
      if (hasFiles(event)) event.preventDefault();
    });
    zone.addEventListener("drop", (event) => {
      depth = 0;
      zone.classList.remove("dropping");
      if (!event.dataTransfer?.files?.length) return;
      event.preventDefault();
      this.add(event.dataTransfer.files);
    });
  }

  #upload(file) {
    const item = { file, name: file.name, size: file.size, state: "uploading" };
    this.#append(item);
    if (this.options.limit && file.size > this.options.limit) {
      this.#fail(item, `${formatBytes(file.size)}: the upload limit is ${formatBytes(this.options.limit)}`);
      return;
    }
    const xhr = new XMLHttpRequest();
    item.xhr = xhr;
    xhr.open("POST", "/api/upload");
    if (this.options.token) xhr.setRequestHeader("Authorization", `Bearer ${this.options.token}`);
    xhr.upload.addEventListener("progress", (event) => {
      if (!event.lengthComputable) return;
      item.progress.max = event.total;
      item.progress.value = event.loaded;
      item.el.dataset.progressEvents = String(Number(item.el.dataset.progressEvents ?? 0) + 1);
    });
    xhr.addEventListener("load", () => {
      let answer = null;
      try {
        answer = JSON.parse(xhr.responseText);
      } catch {
        answer = null;
      }
      if (xhr.status === 200 && answer?.ok) this.#ready(item, answer);
      else this.#fail(item, answer?.error?.message ?? `The upload failed (HTTP ${xhr.status}).`);
    });
    xhr.addEventListener("error", () => this.#fail(item, "The upload failed: the connection was lost (or the file is over the limit)."));
    const form = new FormData();
    form.append("file", file, file.name);
    xhr.send(form);
  }

  #append(item) {
    item.progress = h("progress", { class: "attachment-progress", max: 1, value: 0, "aria-label": `Uploading ${item.name}` });
    item.status = h("span", { class: "attachment-status" });
    item.el = h(
      "li",
      { class: "attachment-chip", "data-testid": "attachment-chip", "data-state": item.state, title: item.name },
      item.answer ? attachmentPicture(item.answer) : icon(item.file?.type?.startsWith("image/") || /\.(png|jpe?g|gif|webp)$/i.test(item.name) ? "image" : "file"),
      h("span", { class: "attachment-name", text: item.name }),
      h("span", { class: "attachment-size", text: formatBytes(item.size) }),
      item.state === "uploading" ? item.progress : null,
      item.status,
      h("button", { type: "button", class: "btn-ghost btn-icon", "aria-label": `Remove ${item.name}`, title: "Remove (an uploaded file stays in the workspace)", onclick: () => this.#cancel(item) }, icon("close")),
    );
    if (item.answer) item.el.dataset.path = item.answer.path;
    this.items.push(item);
    this.els.tray.append(item.el);
    this.#changed();
  }

  #ready(item, answer) {
    item.state = "ready";
    item.answer = answer;
    item.el.dataset.state = "ready";
    item.el.dataset.path = answer.path;
    item.el.title = `${answer.path}${answer.note ? ` · ${answer.note}` : ""}`;
    item.el.querySelector(".attachment-name").textContent = answer.name;
    item.el.querySelector(".icon")?.replaceWith(attachmentPicture(answer));
    item.status.textContent = answer.truncated ? "long: the model sees the start" : "";
    this.options.onUploaded?.(answer);
    this.#changed();
  }

  #fail(item, message) {
    item.state = "error";
    item.el.dataset.state = "error";
    item.el.setAttribute("role", "alert");
    item.progress.remove();
    item.status.textContent = message;
    item.el.title = message;
    this.#changed();
  }

  #cancel(item) {
    item.xhr?.abort();
    this.#remove(item);
    this.#changed();
  }

  #remove(item) {
    item.el.remove();
    this.items = this.items.filter((other) => other !== item);
  }

  #changed() {
    this.els.tray.hidden = !this.items.length;
    this.options.onChange?.();
  }
}
